// A plan search written as plan.json and read back, as `tessera export` reads
// it: what the export tests start from.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/planner/plan_file.h"
#include "tessera/planner/search.h"
#include "test_models.h"

namespace tessera::planner {

struct Planned {
  Model model;
  PlanFile file;
  std::vector<Candidate> candidates;  // as searched, in file order
};

// The search's request: `gpus` H100s, 8 a node, global batch 64 × seq 1024, with `restrict` applied.
inline PlanRequest plan_request(const std::function<void(PlanRequest&)>& restrict, int64_t gpus) {
  PlanRequest request;
  request.cluster = make_cluster(testing::shipped_gpu("h100-80g"), gpus, 8, 400).value();
  request.global_batch_size = 64;
  request.seq_len = 1024;
  restrict(request);
  return request;
}

// Searches `model` on that request and reads the plan document back as `tessera export` does.
inline Planned plan_for(const std::string& model_name, const std::function<void(PlanRequest&)>& restrict, int64_t gpus = 8) {
  Planned out{testing::shipped_model(model_name), {}, {}};
  const PlanRequest request = plan_request(restrict, gpus);
  auto result = search_plans(out.model, request);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
  if (!result.ok()) return out;
  EXPECT_FALSE(result->plans.empty());
  const int top_k = 1000;
  const nlohmann::json document = plan_document(out.model, model_name, request, result.value(), top_k);
  auto file = parse_plan_file(document.dump(2), "plan.json");
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  if (!file.ok()) return out;
  out.file = std::move(file).value();
  out.candidates = result->plans;
  EXPECT_EQ(out.file.plans.size(), out.candidates.size());
  return out;
}

// The search's refusal of that request: its one-line message.
inline std::string search_refusal(const std::string& model_name, const std::function<void(PlanRequest&)>& restrict, int64_t gpus = 8) {
  auto result = search_plans(testing::shipped_model(model_name), plan_request(restrict, gpus));
  EXPECT_FALSE(result.ok());
  return result.ok() ? std::string() : result.error().message;
}

// Llama-2-70B under --runtime megatron at tp 4 × pp 4 on 64 H100s (global
// batch 256 × 4096), pipelines of `schedule` only where one is given.
inline Planned megatron_llama_70b_tp4_pp4(std::optional<PipelineSchedule> schedule = std::nullopt) {
  return plan_for("llama-2-70b", [&](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.tp = 4;
    r.pp = 4;
    r.global_batch_size = 256;
    r.seq_len = 4096;
    r.pp_schedule = schedule;
  }, 64);
}

// The text an exporter (export.h) writes for the plan at `index`; a refusal fails the test.
inline std::string exported(Result<std::string> (*exporter)(const PlanFile&, size_t), const Planned& planned, size_t index) {
  auto text = exporter(planned.file, index);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  return text.ok() ? text.value() : std::string();
}

// Each of `lines` appears in `text` (a line, or several, of an exported file).
inline void expect_lines(const std::string& text, std::initializer_list<std::string> lines) {
  for (const std::string& line : lines) EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
}

// The index of the first plan that `pick` accepts.
inline size_t find_plan(const Planned& planned, const std::function<bool(const EstimateRequest&)>& pick) {
  for (size_t i = 0; i < planned.file.plans.size(); ++i) {
    if (pick(planned.file.plans[i])) return i;
  }
  ADD_FAILURE() << "no plan of the kind wanted among " << planned.file.plans.size();
  return 0;
}

}  // namespace tessera::planner
