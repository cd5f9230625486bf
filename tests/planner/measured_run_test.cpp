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

// Byte counts from a hand-edited or corrupt file: whole, not negative, at most
// 2^50. A float was truncated (or, past int64, undefined) and compared as 0.0%.
TEST(MeasuredRun, ByteCountsMustBeWholeNonNegativeAndBounded) {
  const auto metrics = [](const nlohmann::json& device_bytes) {
    nlohmann::json doc{{"schema", 1}, {"kind", "metrics"}};
    doc["ranks"] = nlohmann::json::array({{{"categories", {{"activations", {{"device_bytes", device_bytes}, {"host_bytes", 0}}}}}}});
    return parse_measured_run(doc.dump(), "metrics.json");
  };
  for (const nlohmann::json& bad : {nlohmann::json(1e30), nlohmann::json(2.5), nlohmann::json(-4096), nlohmann::json("12"),
                                    nlohmann::json(uint64_t{1} << 63), nlohmann::json((int64_t{1} << 50) + 1)}) {
    auto run = metrics(bad);
    ASSERT_FALSE(run.ok()) << bad.dump();
    EXPECT_EQ(run.error().message, "metrics.json: category 'activations' device_bytes must be a whole number of bytes from 0 to 2^50 (1 PiB), got " +
                                       bad.dump());
  }
  auto largest = metrics(int64_t{1} << 50);
  ASSERT_TRUE(largest.ok()) << largest.error().message;
  EXPECT_EQ(largest->memory[MemoryCategory::activations].device, int64_t{1} << 50);
  auto not_an_object = parse_measured_run(R"({"schema": 1, "kind": "metrics", "ranks": [{"categories": {"logits": 5}}]})", "m.json");
  ASSERT_FALSE(not_an_object.ok());
  EXPECT_EQ(not_an_object.error().message, "m.json: category 'logits' must be an object with device_bytes and host_bytes");
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
