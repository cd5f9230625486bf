// The memory model against measured peaks (data/measurements/published_memory.json):
// estimates every row through estimate_memory, as `tessera estimate` does, and
// prints the predicted and measured bytes of the rank the source measured and
// the error. The target is 5% on every row, and the test holds each row
// to it (ColossalAI's Gemini Llama 2 7B run at -0.2% as transformers 4.32 keeps
// its logits and attention mask; -8.3% before the release was a setting), but
// torchtitan's two eager rows, -5.2% and -5.4%, held to 6% (README, "Memory"). A
// third test checks the runs at the edge of their GPUs' memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "published_rows.h"
#include "test_models.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

EstimateRequest request_of(const json& result) {
  const json& l = result["layout"];
  const json& t = result["training"];
  const json& setup = result["simulate"];
  EstimateRequest r;
  r.plugin.kind = parse_enum<PluginKind>(setup["plugin"].get<std::string>()).value();
  r.plugin.runtime = parse_enum<Runtime>(setup["runtime"].get<std::string>()).value();
  r.training.activation_profile = parse_enum<ActivationProfile>(setup["activation_profile"].get<std::string>()).value();
  r.training.transformers_version = testing::row_transformers_version(setup);
  r.training.torch_compile = setup.value("torch_compile", false);
  r.plugin.fused_rmsnorm = setup.value("fused_rmsnorm", false);
  r.plugin.compile_model_only = setup.value("compile_model_only", false);
  r.training.optimizer = parse_enum<OptimizerKind>(t["optimizer"].get<std::string>()).value();
  r.training.precision = parse_enum<Precision>(t["precision"].get<std::string>()).value();
  r.training.recompute = parse_enum<RecomputeMode>(t["recompute"].get<std::string>()).value();
  r.training.recompute_num_layers = t.value("recompute_num_layers", 0);
  r.training.seq_len = result["model"]["seq_len"];
  r.training.micro_batch_size = l["micro_batch_size"];
  r.layout = ParallelLayout{l["dp"], l["tp"], l["pp"], l.value("sequence_parallel", false)};
  r.training.num_micro_batches = t["global_batch_size"].get<int64_t>() / (r.training.micro_batch_size * r.layout.dp);
  r.plugin.zero_stage = t.value("zero_stage", -1);  // -1: the plugin's own
  if (const int64_t chunks = l.value("virtual_pipeline_chunks", 1); chunks > 1) {
    r.plugin.pp_schedule = PipelineSchedule::interleaved;
    r.plugin.num_model_chunks = chunks;
  }
  // What torch.cuda.max_memory_allocated counts: tensors from the caching allocator;
  // max_memory_reserved: its segments, the allocator's reserve with them.
  if (result["reported"]["metric"] == "max_memory_allocated") r.assumptions = r.assumptions.as_pytorch_counts(false);
  if (result["reported"]["metric"] == "max_memory_reserved") r.assumptions = r.assumptions.as_pytorch_counts(true);
  return r;
}

// The rank the source measured: Megatron logs its last rank, which holds the
// last pipeline stage; a run without a pipeline has one row.
const RankMemory& measured_rank(const MemoryEstimate& estimate) {
  return *std::find_if(estimate.ranks.rbegin(), estimate.ranks.rend(), [](const RankMemory& r) { return r.has_head; });
}

struct Row {
  std::string id;
  bool torchtitan_eager = false;  // README, "Memory": held to 6%
  double measured_gib = 0;
  double predicted_gib = 0;
  double between_measured_gib = 0;  // 0 where the source gives no between-steps figure
  double between_predicted_gib = 0;  // the model states and what the runtime keeps from the last step
  double error() const { return predicted_gib / measured_gib - 1; }
  double between_error() const { return between_predicted_gib / between_measured_gib - 1; }
  // What the step adds at its peak to what it starts with: the activations and
  // their buffers, less what the last step left and this one frees first.
  double step_error() const { return (predicted_gib - between_predicted_gib) / (measured_gib - between_measured_gib) - 1; }
};

std::vector<Row> estimate_every_row() {
  std::vector<Row> rows;
  const json doc = testing::published_file("published_memory.json");
  for (const json& result : doc["results"]) {
    const Model model = testing::published_model(result["model"]);
    const GpuProfile gpu = load_gpu(result["cluster"]["gpu"].get<std::string>()).value();
    auto estimate = estimate_memory(model, gpu, request_of(result));
    EXPECT_TRUE(estimate.ok()) << result["id"] << ": " << (estimate.ok() ? "" : estimate.error().message);
    if (!estimate.ok()) continue;
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    const json& reported = result["reported"];
    const RankMemory& rank = measured_rank(*estimate);
    const json& setup = result["simulate"];
    const bool torchtitan_eager = setup["runtime"] == "torchtitan" && !setup.value("torch_compile", false);
    rows.push_back({result["id"], torchtitan_eager, reported["bytes"].get<double>() / kGiB, static_cast<double>(rank.device_total) / kGiB,
                    reported.value("between_steps_allocated_bytes", 0.0) / kGiB,
                    static_cast<double>(testing::model_state_bytes(rank) + rank.retained_between_steps) / kGiB});
  }
  return rows;
}

TEST(PublishedMemory, EstimateAgainstEveryMeasuredPeak) {
  const std::vector<Row> rows = estimate_every_row();
  ASSERT_GE(rows.size(), 6u);
  std::vector<double> errors;
  for (const Row& row : rows) {
    std::printf("%-44s measured %7.2f GiB, predicted %7.2f GiB (%+.1f%%)\n", row.id.c_str(), row.measured_gib, row.predicted_gib, 100 * row.error());
    // The target; torchtitan's eager rows measure 5 GiB above their compiled twins
    // where the planner finds 0.3 (README, "Memory"), and are held to 6%.
    EXPECT_LT(std::abs(row.error()), row.torchtitan_eager ? 0.06 : 0.05) << row.id;
    errors.push_back(std::abs(row.error()));
  }
  std::sort(errors.begin(), errors.end());
  std::printf("median |error| %.1f%% over %zu rows\n", 100 * errors[errors.size() / 2], errors.size());
}

// Megatron logs what stays allocated between steps too: the model states and,
// on a pipeline, each receiving chunk's last input and its gradient
// (retained_between_steps.cpp). Each side of the peak is held to the bound
// README states, so that two errors cannot hide each other in the peak.
TEST(PublishedMemory, WhatStaysBetweenStepsAndWhatTheStepAdds) {
  int compared = 0;
  for (const Row& row : estimate_every_row()) {
    if (row.between_measured_gib == 0) continue;
    std::printf("%-44s between steps measured %6.2f GiB, predicted %6.2f GiB (%+.1f%%); ", row.id.c_str(), row.between_measured_gib,
                row.between_predicted_gib, 100 * row.between_error());
    std::printf("the step adds measured %6.2f GiB, predicted %6.2f GiB (%+.1f%%)\n", row.measured_gib - row.between_measured_gib,
                row.predicted_gib - row.between_predicted_gib, 100 * row.step_error());
    EXPECT_LT(std::abs(row.between_error()), 0.02) << row.id;
    EXPECT_LT(std::abs(row.step_error()), 0.04) << row.id;
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

// Runs at the edge of their GPUs' memory (published_memory.json, fit_boundaries):
// the source ran the configuration at one micro-batch and ran out of memory at
// the next it tried. The estimate, with its default reserves (CUDA context, NCCL
// buffers, the allocator's 5%), must draw the line between the two.
TEST(PublishedMemory, FitBoundaries) {
  const json doc = testing::published_file("published_memory.json");
  ASSERT_GE(doc["fit_boundaries"].size(), 3u);
  for (const json& row : doc["fit_boundaries"]) {
    const Model model = testing::published_model(row["model"]);
    const GpuProfile gpu = load_gpu(row["cluster"]["gpu"].get<std::string>()).value();
    const auto peak_at = [&](int64_t micro_batch) {
      json result = row;
      result["layout"]["micro_batch_size"] = micro_batch;
      result["training"]["global_batch_size"] = micro_batch * row["layout"]["dp"].get<int64_t>();
      result["reported"] = {{"metric", "device_total"}};  // the planner's own figure, reserves included
      auto estimate = estimate_memory(model, gpu, request_of(result));
      EXPECT_TRUE(estimate.ok()) << row["id"] << ": " << (estimate.ok() ? "" : estimate.error().message);
      return estimate.ok() ? *estimate : MemoryEstimate{};
    };
    const MemoryEstimate ran = peak_at(row["fits_micro_batch"]);
    const MemoryEstimate out_of_memory = peak_at(row["out_of_memory_micro_batch"]);
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    std::printf("%-62s micro-batch %3lld: %6.2f GiB, %3lld: %6.2f GiB, of %6.2f GiB\n", row["id"].get<std::string>().c_str(),
                row["fits_micro_batch"].get<long long>(), static_cast<double>(ran.tightest().device_total) / kGiB,
                row["out_of_memory_micro_batch"].get<long long>(), static_cast<double>(out_of_memory.tightest().device_total) / kGiB,
                static_cast<double>(ran.tightest().gpu_capacity) / kGiB);
    EXPECT_TRUE(ran.fits()) << row["id"];
    EXPECT_FALSE(out_of_memory.fits()) << row["id"];
  }
}

}  // namespace
}  // namespace tessera::planner
