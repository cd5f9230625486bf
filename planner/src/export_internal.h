// Helpers shared by the exporters (export_*.cpp); not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::planner::export_detail {

// Whether the plan at `index` exists and is a valid request for the file's
// model and GPU; errors name --plan with the 1-based numbers a user types.
Status check_plan(const PlanFile& file, size_t index);

// The plan's object in the file (description, predictions), or an empty object.
const nlohmann::json& plan_json(const PlanFile& file, size_t index);

// Optimizer steps take this many micro-batches per data-parallel rank outside the
// pipeline: the micro-batches themselves without one, 1 when the pipeline runs them.
int64_t gradient_accumulation_steps(const EstimateRequest& request);

// Sequences per optimizer step: micro-batch × micro-batches × dp.
int64_t sequences_per_step(const EstimateRequest& request);

// "16 × h100-80g (2 nodes × 8)": the cluster a header comment names.
std::string describe_cluster(const ClusterSpec& cluster);

// "#   predicted: 53.03 GiB per GPU at most, 139259 tokens/s\n" from the plan's
// object in the file; empty where the file has no predictions.
std::string predicted_comment(const nlohmann::json& plan);

// A dropout probability of the model's config.json, under its key there.
struct DropoutField {
  std::string name;  // e.g. "resid_pdrop"
  double probability = 0;
};

// The config's nonzero dropout probabilities that the plan's activation profile
// assumes are 0 (export_dropout.cpp says which profiles): empty when the profile
// counts dropout as the config has it, or the config has none.
Result<std::vector<DropoutField>> uncounted_dropout(const PlanFile& file, const EstimateRequest& request);

// "attn_pdrop 0.1, resid_pdrop 0.1".
std::string describe_dropout(const std::vector<DropoutField>& fields);

// An error of code `unsupported` that names the target: "--to deepspeed: ...".
Error cannot_express(const char* target, const std::string& why);

}  // namespace tessera::planner::export_detail
