// Reading metrics.json back and comparing it with a prediction, as `tessera compare` does.
#include <gtest/gtest.h>

#include "tessera/planner/json_io.h"
#include "tessera/planner/measured_run.h"

namespace tessera::planner {

TEST(MeasuredRun, ReadsTheRunsSetUpAndItsFirstRankRow) {
  EstimateRequest request;
  request.training.precision = Precision::fp32;
  request.training.seq_len = 64;
  nlohmann::json doc{{"schema", 1}, {"kind", "metrics"}, {"model", {{"name", "tiny-gpt2"}}}, {"tokens_per_s", 1234.5}};
  doc.update(request_to_json(request));
  doc["ranks"] = nlohmann::json::array({{{"categories", {{"activations", {{"device_bytes", 4096}, {"host_bytes", 0}}},
                                                          {"parameters", {{"device_bytes", 100}, {"host_bytes", 7}}}}}}});
  auto run = parse_measured_run(doc.dump(), "metrics.json");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->model_name, "tiny-gpt2");
  EXPECT_EQ(run->request.training.seq_len, 64);
  EXPECT_EQ(run->request.training.precision, Precision::fp32);
  EXPECT_EQ(run->memory[MemoryCategory::activations].device, 4096);
  EXPECT_EQ(run->memory[MemoryCategory::parameters].host, 7);
  EXPECT_DOUBLE_EQ(run->tokens_per_s, 1234.5);
  EXPECT_FALSE(parse_measured_run(R"({"schema": 1, "kind": "plan"})", "plan.json").ok());
  EXPECT_FALSE(parse_measured_run(R"({"schema": 1, "kind": "metrics", "ranks": []})", "m.json").ok());
}

TEST(MeasuredRun, ErrorIsPredictedMinusMeasuredOverMeasured) {
  MemoryBreakdown predicted, measured;
  predicted.add(MemoryCategory::activations, MemorySpace::device, 120);
  measured.add(MemoryCategory::activations, MemorySpace::device, 100);
  predicted.add(MemoryCategory::logits, MemorySpace::device, 5);
  const std::vector<CategoryError> errors = compare_memory(predicted, measured);
  ASSERT_EQ(errors.size(), static_cast<size_t>(kNumMemoryCategories));
  EXPECT_DOUBLE_EQ(errors[static_cast<size_t>(MemoryCategory::activations)].error_pct, 20.0);
  EXPECT_DOUBLE_EQ(errors[static_cast<size_t>(MemoryCategory::logits)].error_pct, 100.0);  // measured nothing
  EXPECT_DOUBLE_EQ(errors[static_cast<size_t>(MemoryCategory::parameters)].error_pct, 0.0);
}

}  // namespace tessera::planner
