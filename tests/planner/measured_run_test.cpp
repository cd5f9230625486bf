// Reading metrics.json back and comparing it with a prediction, as `tessera compare` does.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <vector>

#include "../support/scratch_dir.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/measured_run.h"

namespace tessera::planner {

namespace {

using nlohmann::json;

// A metrics document whose "ranks" array is `rows`.
std::string metrics_with_rows(const json& rows) { return json{{"schema", 1}, {"kind", "metrics"}, {"ranks", rows}}.dump(); }

// A row of ranks first..last holding `device` and `host` bytes of activations.
json activation_row(int64_t first, int64_t last, int64_t device, int64_t host) {
  return json{{"ranks", {first, last}}, {"categories", {{"activations", {{"device_bytes", device}, {"host_bytes", host}}}}}};
}

RankRow row_of(int64_t first, int64_t last, int64_t device, int64_t host) {
  RankRow row{first, last, {}};
  row.memory.add(MemoryCategory::activations, MemorySpace::device, device);
  row.memory.add(MemoryCategory::activations, MemorySpace::host, host);
  return row;
}

const CategoryError& activations_of(const RankComparison& rank) { return rank.categories[static_cast<size_t>(MemoryCategory::activations)]; }

}  // namespace

TEST(MeasuredRun, ReadsTheRunsSetUpAndARowWithoutRanksAsRankZero) {
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
  ASSERT_EQ(run->ranks.size(), 1u);
  EXPECT_EQ(run->ranks[0].first_rank, 0);  // written before rows named their ranks
  EXPECT_EQ(run->ranks[0].last_rank, 0);
  EXPECT_EQ(run->ranks[0].memory[MemoryCategory::activations].device, 4096);
  EXPECT_EQ(run->ranks[0].memory[MemoryCategory::parameters].host, 7);
  EXPECT_DOUBLE_EQ(run->tokens_per_s, 1234.5);
  EXPECT_FALSE(parse_measured_run(R"({"schema": 1, "kind": "plan"})", "plan.json").ok());
  EXPECT_FALSE(parse_measured_run(R"({"schema": 1, "kind": "metrics", "ranks": []})", "m.json").ok());
}

// Byte counts from a hand-edited or corrupt file: whole, not negative, at most
// 2^50. A float was truncated (or, past int64, undefined) and compared as 0.0%.
// What the GUI's measured-run view draws: where the run ran, and its per-step
// loss, gradient norm (null for a skipped fp16 step) and step time.
TEST(MeasuredRun, ReadsTheDeviceAndThePerStepSeries) {
  json doc = json::parse(metrics_with_rows(json::array({activation_row(0, 0, 100, 0)})));
  doc["device"] = "cpu";
  doc["loss"] = {10.9, 10.2, 9.8};
  doc["grad_norm"] = {2.5, nullptr, 1.5};
  doc["step_time_s"] = {0.5, 0.25, 0.25};
  auto run = parse_measured_run(doc.dump(), "metrics.json");
  ASSERT_TRUE(run.ok()) << run.error().message;
  EXPECT_EQ(run->device, "cpu");
  EXPECT_EQ(run->loss, (std::vector<double>{10.9, 10.2, 9.8}));
  ASSERT_EQ(run->grad_norm.size(), 3u);
  EXPECT_TRUE(std::isnan(run->grad_norm[1]));
  EXPECT_EQ(run->step_time_s, (std::vector<double>{0.5, 0.25, 0.25}));
  doc["loss"] = {10.9, "high"};
  EXPECT_FALSE(parse_measured_run(doc.dump(), "metrics.json").ok());
  doc.erase("loss");
  EXPECT_TRUE(parse_measured_run(doc.dump(), "metrics.json")->loss.empty());
}

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
    EXPECT_EQ(run.error().message, "metrics.json: \"ranks\"[0] category 'activations' device_bytes must be a whole number of bytes from 0 to 2^50 (1 PiB), got " +
                                       bad.dump());
  }
  auto largest = metrics(int64_t{1} << 50);
  ASSERT_TRUE(largest.ok()) << largest.error().message;
  EXPECT_EQ(largest->ranks[0].memory[MemoryCategory::activations].device, int64_t{1} << 50);
  auto not_an_object = parse_measured_run(R"({"schema": 1, "kind": "metrics", "ranks": [{"categories": {"logits": 5}}]})", "m.json");
  ASSERT_FALSE(not_an_object.ok());
  EXPECT_EQ(not_an_object.error().message, "m.json: \"ranks\"[0] category 'logits' must be an object with device_bytes and host_bytes");
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

// Host bytes are compared as device bytes are, with the same error rule.
TEST(MeasuredRun, HostBytesHaveTheirOwnError) {
  MemoryBreakdown predicted, measured;
  predicted.add(MemoryCategory::optimizer_states, MemorySpace::host, 150);
  measured.add(MemoryCategory::optimizer_states, MemorySpace::host, 200);
  predicted.add(MemoryCategory::parameters, MemorySpace::host, 8);
  const std::vector<CategoryError> errors = compare_memory(predicted, measured);
  const CategoryError& states = errors[static_cast<size_t>(MemoryCategory::optimizer_states)];
  EXPECT_EQ(states.predicted_host_bytes, 150);
  EXPECT_EQ(states.measured_host_bytes, 200);
  EXPECT_DOUBLE_EQ(states.host_error_pct, -25.0);
  EXPECT_DOUBLE_EQ(states.error_pct, 0.0);  // nothing on the device either side
  EXPECT_DOUBLE_EQ(errors[static_cast<size_t>(MemoryCategory::parameters)].host_error_pct, 100.0);
}

TEST(MeasuredRun, ReadsEveryRankRowWithDeviceAndHostBytes) {
  auto run = parse_measured_run(metrics_with_rows(json::array({activation_row(0, 0, 100, 1), activation_row(1, 1, 200, 2),
                                                                activation_row(3, 3, 300, 3)})),
                                "metrics.json");
  ASSERT_TRUE(run.ok()) << run.error().message;
  ASSERT_EQ(run->ranks.size(), 3u);
  EXPECT_EQ(run->ranks[1].first_rank, 1);
  EXPECT_EQ(run->ranks[1].memory[MemoryCategory::activations].device, 200);
  EXPECT_EQ(run->ranks[1].memory[MemoryCategory::activations].host, 2);
  EXPECT_EQ(run->ranks[2].first_rank, 3);  // a rank may be missing; the ones present are compared
  EXPECT_EQ(run->ranks[2].memory[MemoryCategory::activations].host, 3);
}

TEST(MeasuredRun, RankRowsMustBeValidRangesInRankOrder) {
  const auto message = [](const json& rows) {
    auto run = parse_measured_run(metrics_with_rows(rows), "m.json");
    return run.ok() ? std::string("parsed") : run.error().message;
  };
  EXPECT_EQ(message(json::array({activation_row(0, 3, 1, 0)})), "m.json: a row covers ranks 0-3; a metrics file has one row per rank");
  EXPECT_EQ(message(json::array({activation_row(1, 1, 1, 0), activation_row(0, 0, 1, 0)})),
            "m.json: \"ranks\"[1] starts at rank 0, which an earlier row covers; rows must be in rank order without overlap");
  EXPECT_EQ(message(json::array({activation_row(2, 1, 1, 0)})), "m.json: \"ranks\"[0] \"ranks\" must be [first, last] with 0 <= first <= last < 1048576, got [2,1]");
  EXPECT_EQ(message(json::array({activation_row(0, 1 << 20, 1, 0)})),
            "m.json: \"ranks\"[0] \"ranks\" must be [first, last] with 0 <= first <= last < 1048576, got [0,1048576]");
  EXPECT_EQ(message(json::array({activation_row(0, 0, 1, 0), json{{"ranks", {1, 1}}}})), "m.json: \"ranks\"[1] must be an object with \"categories\"");
}

// A plan file's best plan, as `tessera plan` writes it: rows covering ranges of ranks.
TEST(MeasuredRun, ReadsAPlansRankRanges) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = scratch.path("plan.json");
  json plan{{"schema", 1}, {"kind", "plan"}, {"model", {{"name", "gpt2"}}}};
  plan["plans"] = json::array({json{{"memory", {{"ranks", json::array({activation_row(0, 3, 400, 0), activation_row(4, 7, 500, 9)})}}}}});
  std::ofstream(path) << plan.dump();
  auto predicted = read_predicted_run(path);
  ASSERT_TRUE(predicted.ok()) << predicted.error().message;
  EXPECT_EQ(predicted->model_name, "gpt2");
  ASSERT_EQ(predicted->ranks.size(), 2u);
  EXPECT_EQ(predicted->ranks[1].first_rank, 4);
  EXPECT_EQ(predicted->ranks[1].last_rank, 7);
  EXPECT_EQ(predicted->ranks[1].memory[MemoryCategory::activations].host, 9);
}

// Each measured rank meets the predicted row whose range holds it: ranks 0-3
// are pipeline stage 0 here, ranks 4-7 stage 1.
TEST(MeasuredRun, EachMeasuredRankIsComparedWithThePredictedRowHoldingIt) {
  const std::vector<RankRow> predicted = {row_of(0, 3, 400, 0), row_of(4, 7, 500, 10)};
  std::vector<RankRow> measured;
  for (int64_t rank = 0; rank < 8; ++rank) measured.push_back(row_of(rank, rank, rank == 5 ? 400 : (rank < 4 ? 400 : 500), rank < 4 ? 0 : 8));
  auto ranks = compare_memory(predicted, "plan.json", measured, "metrics.json");
  ASSERT_TRUE(ranks.ok()) << ranks.error().message;
  ASSERT_EQ(ranks->size(), 8u);
  for (int64_t rank = 0; rank < 8; ++rank) {
    const CategoryError& a = activations_of((*ranks)[static_cast<size_t>(rank)]);
    EXPECT_EQ((*ranks)[static_cast<size_t>(rank)].rank, rank);
    EXPECT_EQ(a.predicted_bytes, rank < 4 ? 400 : 500) << rank;
    EXPECT_DOUBLE_EQ(a.error_pct, rank == 5 ? 25.0 : 0.0) << rank;
    EXPECT_DOUBLE_EQ(a.host_error_pct, rank < 4 ? 0.0 : 25.0) << rank;  // predicted 10, measured 8
  }
  EXPECT_DOUBLE_EQ(max_abs_error_pct(ranks.value()), 25.0);
  EXPECT_DOUBLE_EQ(max_abs_error_pct({}), 0.0);
}

TEST(MeasuredRun, AMeasuredRankThePlanDoesNotCoverIsAnError) {
  const std::vector<RankRow> predicted = {row_of(0, 3, 400, 0)};
  const std::vector<RankRow> measured = {row_of(0, 0, 400, 0), row_of(4, 4, 400, 0)};
  auto ranks = compare_memory(predicted, "plan.json", measured, "metrics.json");
  ASSERT_FALSE(ranks.ok());
  EXPECT_EQ(ranks.error().message,
            "metrics.json has rank 4, which plan.json does not cover (it predicts ranks 0-3)");
}

}  // namespace tessera::planner
