// plan.json (schema 1): what `tessera plan` writes and the engine, the GUI and
// `tessera export` read. Documented field by field in docs/plan-json.md.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/planner/search.h"

namespace tessera::planner {

// `model_source` is what --model was given (a shipped name or a config path),
// so that a reader can load the same model. At most `top_k` plans are written.
nlohmann::json plan_document(const Model& model, const std::string& model_source, const PlanRequest& request,
                             const PlanSearchResult& result, int top_k);

struct PlanFile {
  std::string model_source;
  ClusterSpec cluster;
  int64_t global_batch_size = 0;
  int64_t seq_len = 0;
  std::vector<EstimateRequest> plans;  // best first
  nlohmann::json document;             // the whole file, for exporters that need more
};

Result<PlanFile> parse_plan_file(std::string_view text, const std::string& source);
Result<PlanFile> read_plan_file(const std::string& path);

}  // namespace tessera::planner
