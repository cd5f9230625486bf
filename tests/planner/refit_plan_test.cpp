// refit_plan: a chosen plan under changed inputs keeps its plugin and layout
// and takes the new training settings, or is refused where the search for the
// new inputs could not return it. And the input limits the headers publish are
// the ones the validators apply.
#include <gtest/gtest.h>

#include "tessera/planner/refit_plan.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

PlanRequest on_h100s(int64_t gpus, int64_t global_batch, int64_t seq) {
  PlanRequest r;
  r.cluster = make_cluster(testing::shipped_gpu("h100-80g"), gpus, 8, 400).value();
  r.global_batch_size = global_batch;
  r.seq_len = seq;
  return r;
}

EstimateRequest hybrid_plan() {
  EstimateRequest plan;  // hybrid_parallel dp 2 × tp 4 × pp 2 on 16 GPUs, 32 sequences: micro-batch 2 × 8
  plan.plugin.kind = PluginKind::hybrid_parallel;
  plan.plugin.zero_stage = 1;
  plan.layout = ParallelLayout{2, 4, 2, false};
  plan.training.micro_batch_size = 2;
  plan.training.num_micro_batches = 8;
  plan.training.seq_len = 4096;
  plan.assumptions.cuda_context_bytes = 0;
  return plan;
}

TEST(RefitPlan, KeepsTheLayoutAndTakesTheNewTrainingSettings) {
  PlanRequest request = on_h100s(16, 32, 2048);
  request.precision = Precision::fp16;
  request.optimizer = OptimizerKind::sgd;
  request.recompute = {RecomputeMode::full};
  const auto refit = refit_plan(hybrid_plan(), request);
  ASSERT_TRUE(refit.has_value());
  EXPECT_EQ(refit->training.seq_len, 2048);
  EXPECT_EQ(refit->training.precision, Precision::fp16);
  EXPECT_EQ(refit->training.optimizer, OptimizerKind::sgd);
  EXPECT_EQ(refit->training.recompute, RecomputeMode::full);
  EXPECT_EQ(refit->training.micro_batch_size, 2);
  EXPECT_EQ(refit->training.num_micro_batches, 8);
  EXPECT_EQ(refit->layout.tp, 4);
  EXPECT_EQ(refit->plugin.zero_stage, 1);
  EXPECT_EQ(refit->assumptions.cuda_context_bytes, 0);  // the plan's own assumptions
  // The refitted plan is one the search for the new request ranks.
  const Model model = testing::shipped_model("llama-2-13b");
  EXPECT_TRUE(estimate_memory(model, request.cluster.gpu, *refit).ok());
}

// A plan recomputing some blocks, refitted to another mode, leaves its count
// behind (a count is full recompute's), and the result is a valid request.
TEST(RefitPlan, AnotherRecomputeModeDropsTheCountOfBlocks) {
  EstimateRequest plan = hybrid_plan();
  plan.training.recompute = RecomputeMode::full;
  plan.training.recompute_num_layers = 3;
  PlanRequest request = on_h100s(16, 32, 2048);
  request.recompute = {RecomputeMode::selective};
  const auto refit = refit_plan(plan, request);
  ASSERT_TRUE(refit.has_value());
  EXPECT_EQ(refit->training.recompute, RecomputeMode::selective);
  EXPECT_EQ(refit->training.recompute_num_layers, 0);
  EXPECT_TRUE(estimate_memory(testing::shipped_model("llama-2-13b"), request.cluster.gpu, *refit).ok());
  request.recompute = {RecomputeMode::none, RecomputeMode::full};  // the plan's own mode is searched: it keeps its count
  EXPECT_EQ(refit_plan(plan, request)->training.recompute_num_layers, 3);
}

TEST(RefitPlan, RefusesWhatTheSearchCouldNotReturn) {
  const EstimateRequest plan = hybrid_plan();
  PlanRequest request = on_h100s(16, 32, 4096);
  ASSERT_TRUE(refit_plan(plan, request).has_value());
  request.plugins = {PluginKind::gemini};
  EXPECT_FALSE(refit_plan(plan, request).has_value()) << "filtered out by --plugin";
  request.plugins = {PluginKind::gemini, PluginKind::hybrid_parallel};
  EXPECT_TRUE(refit_plan(plan, request).has_value());
  EXPECT_FALSE(refit_plan(plan, on_h100s(16, 2, 4096)).has_value()) << "32 sequences per step against a global batch of 2";
  EXPECT_FALSE(refit_plan(plan, on_h100s(32, 32, 4096)).has_value()) << "16 GPUs against a cluster of 32";
  request = on_h100s(16, 32, 4096);
  request.tp = 2;
  EXPECT_FALSE(refit_plan(plan, request).has_value());
  request = on_h100s(16, 32, 4096);
  request.micro_batch_size = 1;
  EXPECT_FALSE(refit_plan(plan, request).has_value());
  request = on_h100s(16, 32, 4096);
  request.zero_stage = 0;
  EXPECT_FALSE(refit_plan(plan, request).has_value());
}

TEST(InputLimits, AreTheOnesTheValidatorsApply) {
  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  EXPECT_TRUE(make_cluster(gpu, kMaxGpus, 8, 400).ok());
  EXPECT_FALSE(make_cluster(gpu, kMaxGpus + 8, 8, 400).ok());
  EXPECT_TRUE(make_cluster(gpu, kMaxGpusPerNode, kMaxGpusPerNode, 400).ok());
  EXPECT_FALSE(make_cluster(gpu, kMaxGpusPerNode + 1, kMaxGpusPerNode + 1, 400).ok());
  EXPECT_TRUE(make_cluster(gpu, 8, 8, kMaxInterNodeGbitS).ok());
  EXPECT_FALSE(make_cluster(gpu, 8, 8, kMaxInterNodeGbitS * 1.5).ok());
  const Model model = testing::shipped_model("llama-2-13b");
  PlanRequest request = on_h100s(8, kMaxGlobalBatchSize, kMaxSeqLen);
  EXPECT_TRUE(validate_plan_request(model, request).ok());
  request.global_batch_size = kMaxGlobalBatchSize + 1;
  EXPECT_FALSE(validate_plan_request(model, request).ok());
  request = on_h100s(8, 8, kMaxSeqLen + 1);
  EXPECT_FALSE(validate_plan_request(model, request).ok());
}

}  // namespace
}  // namespace tessera::planner
