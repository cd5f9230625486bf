// tessera plan --runtime: each runtime's search tries what that runtime runs,
// and every plan it returns is the estimate of that runtime's model states.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tessera/planner/report.h"
#include "tessera/planner/search.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

PlanRequest under(Runtime runtime, const char* gpu, int64_t gpus, int64_t global_batch, int64_t seq) {
  PlanRequest r;
  r.cluster = make_cluster(testing::shipped_gpu(gpu), gpus, 8, 400).value();
  r.global_batch_size = global_batch;
  r.seq_len = seq;
  r.runtime = runtime;
  return r;
}

// Searches, and checks that every plan is the runtime's own and is what
// `tessera estimate` gives for its settings.
PlanSearchResult search(const Model& model, const PlanRequest& request, PluginKind only_plugin) {
  auto result = search_plans(model, request);
  EXPECT_TRUE(result.ok()) << (result.ok() ? "" : result.error().message);
  if (!result.ok()) return {};
  for (const Candidate& c : result->plans) {
    EXPECT_EQ(c.request.plugin.runtime, request.runtime) << describe_plan(c.request);
    EXPECT_EQ(c.request.plugin.kind, only_plugin) << describe_plan(c.request);
    auto memory = estimate_memory(model, request.cluster.gpu, c.request);
    EXPECT_TRUE(memory.ok() && memory->fits()) << describe_plan(c.request);
    if (memory.ok()) {
      EXPECT_EQ(memory->tightest().device_total, c.memory.tightest().device_total) << describe_plan(c.request);
    }
  }
  return std::move(result).value();
}

bool any_plan(const PlanSearchResult& result, const std::function<bool(const EstimateRequest&)>& matches) {
  return std::any_of(result.plans.begin(), result.plans.end(), [&](const Candidate& c) { return matches(c.request); });
}

// Megatron-Core runs plain data parallelism itself, keeps an fp32 gradient
// buffer (18 bytes per parameter, 6 + 12/d with its distributed optimizer:
// docs/user-guide/features/dist_optimizer.md, model_states_megatron.cpp) and
// shards nothing beyond the optimizer.
TEST(RuntimeSearch, MegatronPlansAreMegatronCoreLayoutsWithItsFp32Gradients) {
  const Model model = testing::shipped_model("llama-2-7b");
  const PlanSearchResult result = search(model, under(Runtime::megatron, "h100-80g", 8, 64, 4096), PluginKind::hybrid_parallel);
  ASSERT_FALSE(result.plans.empty());
  const auto plain_data_parallel = [](const EstimateRequest& r) { return r.layout.tp == 1 && r.layout.pp == 1 && r.layout.dp == 8; };
  EXPECT_TRUE(any_plan(result, plain_data_parallel));
  EXPECT_FALSE(any_plan(result, [](const EstimateRequest& r) { return r.plugin.effective_zero_stage() > 1 || r.plugin.cpu_offload; }));
  for (const Candidate& c : result.plans) {
    if (!plain_data_parallel(c.request)) continue;
    const RankMemory& rank = c.memory.ranks.front();
    EXPECT_EQ(rank.bytes[MemoryCategory::gradients].device, 4 * model.parameter_count) << describe_plan(c.request);
  }
}

// NeMo's settings on every Megatron plan (--grad-reduce-in-bf16, --fp8-param-gather):
// Llama 3 8B at 8,192 tokens on 8 H100s in FP8. Every plan carries both, runs the
// distributed optimizer, and keeps a bf16 gradient buffer; the best one is no
// slower than without them, and the best plan without them needs less memory with them.
TEST(RuntimeSearch, MegatronPlansCarryNemosGradientAndWeightDtypes) {
  const Model model = testing::shipped_model("llama-3-8b");
  PlanRequest request = under(Runtime::megatron, "h100-80g", 8, 128, 8192);
  request.precision = Precision::fp8;
  const PlanSearchResult plain = search(model, request, PluginKind::hybrid_parallel);
  request.grad_reduce_in_bf16 = true;
  request.fp8_param_gather = true;
  const PlanSearchResult nemo = search(model, request, PluginKind::hybrid_parallel);
  ASSERT_FALSE(plain.plans.empty());
  ASSERT_FALSE(nemo.plans.empty());
  for (const Candidate& c : nemo.plans) {
    EXPECT_TRUE(c.request.plugin.grad_reduce_in_bf16 && c.request.plugin.fp8_param_gather) << describe_plan(c.request);
    EXPECT_EQ(c.request.plugin.effective_zero_stage(), 1) << describe_plan(c.request);
  }
  EXPECT_GE(nemo.plans.front().simulation.tokens_per_s, plain.plans.front().simulation.tokens_per_s);
  const Candidate& best_plain = plain.plans.front();
  const auto same = std::find_if(nemo.plans.begin(), nemo.plans.end(), [&](const Candidate& c) { return describe_plan(c.request) == describe_plan(best_plain.request); });
  ASSERT_NE(same, nemo.plans.end()) << describe_plan(best_plain.request);
  EXPECT_LT(same->peak_device_bytes(), best_plain.peak_device_bytes());
}

// torchtitan's FSDP2, with its op-level checkpointing policy searched where the
// model is the Llama block the policy follows.
TEST(RuntimeSearch, TorchtitanSearchesFsdp2AndItsOpLevelPolicyForLlama) {
  const PlanRequest request = under(Runtime::torchtitan, "h100-80g", 8, 64, 1024);
  const PlanSearchResult llama = search(testing::shipped_model("llama-3-8b"), request, PluginKind::torch_fsdp);
  ASSERT_FALSE(llama.plans.empty());
  EXPECT_TRUE(any_plan(llama, [](const EstimateRequest& r) { return r.training.recompute == RecomputeMode::op_selective; }));
  EXPECT_FALSE(any_plan(llama, [](const EstimateRequest& r) { return r.training.recompute == RecomputeMode::selective; })) << "not torchtitan's";
  const PlanSearchResult gpt2 = search(testing::shipped_model("gpt2"), request, PluginKind::torch_fsdp);
  ASSERT_FALSE(gpt2.plans.empty());
  EXPECT_FALSE(any_plan(gpt2, [](const EstimateRequest& r) { return r.training.recompute == RecomputeMode::op_selective; }));
}

// At 32768 tokens the search splits sequences over context-parallel ranks
// under FSDP2 too, as torchtitan's --parallelism.context_parallel_degree does.
TEST(RuntimeSearch, TorchtitanTriesContextParallelismForLongSequences) {
  const PlanSearchResult result = search(testing::shipped_model("llama-3-8b"), under(Runtime::torchtitan, "h100-80g", 8, 8, 32768), PluginKind::torch_fsdp);
  ASSERT_FALSE(result.plans.empty());
  EXPECT_TRUE(any_plan(result, [](const EstimateRequest& r) { return r.layout.cp > 1 && r.layout.dp * r.layout.cp == 8; }));
  EXPECT_NE(describe_plan(result.plans.front().request).find(" × cp "), std::string::npos) << describe_plan(result.plans.front().request);
}

// DeepSpeed ZeRO-3: Llama-2-13B's 16 bytes per parameter over 8 GPUs of 24 GB
// leave no room for activations, so only the offloading variants fit; SGD is
// searched without them (ZeRO-Offload steps with DeepSpeed's CPU Adam).
TEST(RuntimeSearch, DeepSpeedOffloadsWhereZero3AloneDoesNotFit) {
  const Model model = testing::shipped_model("llama-2-13b");
  PlanRequest request = under(Runtime::deepspeed, "rtx4090-24g", 8, 64, 2048);
  const PlanSearchResult adam = search(model, request, PluginKind::low_level_zero);
  ASSERT_FALSE(adam.plans.empty());
  for (const Candidate& c : adam.plans) {
    EXPECT_EQ(c.request.plugin.effective_zero_stage(), 3);
    EXPECT_TRUE(c.request.plugin.cpu_offload) << describe_plan(c.request);
  }
  EXPECT_TRUE(any_plan(adam, [](const EstimateRequest& r) { return r.plugin.deepspeed.offload_param; }));
  request.optimizer = OptimizerKind::sgd;
  auto sgd = search_plans(model, request);
  ASSERT_TRUE(sgd.ok()) << sgd.error().message;
  EXPECT_FALSE(any_plan(sgd.value(), [](const EstimateRequest& r) { return r.plugin.cpu_offload; }));
}

// DeepSpeed's pipeline engine (deepspeed_pipeline.h) is searched beside its
// ZeRO-3: tp × pp × dp layouts with 2 stages or more, at its own ZeRO-1, 1F1B,
// without context or sequence parallelism, in bf16 (BF16_Optimizer) and fp16
// (DeepSpeedZeroOptimizer); --pp picks it, and its plans are what `tessera
// estimate --runtime deepspeed --plugin hybrid_parallel` gives.
TEST(RuntimeSearch, DeepSpeedSearchesItsPipelineEngineBesideZero3) {
  const Model model = testing::shipped_model("llama-2-7b");
  for (const Precision precision : {Precision::bf16, Precision::fp16}) {
    PlanRequest request = under(Runtime::deepspeed, "h100-80g", 16, 64, 4096);
    request.precision = precision;
    auto both = search_plans(model, request);
    ASSERT_TRUE(both.ok()) << both.error().message;
    EXPECT_TRUE(any_plan(both.value(), [](const EstimateRequest& r) { return r.plugin.kind == PluginKind::low_level_zero; }));
    EXPECT_TRUE(any_plan(both.value(), [](const EstimateRequest& r) { return r.plugin.deepspeed_pipeline(); }));
    request.pp = 4;
    const PlanSearchResult pipelines = search(model, request, PluginKind::hybrid_parallel);
    ASSERT_FALSE(pipelines.plans.empty());
    for (const Candidate& c : pipelines.plans) {
      const EstimateRequest& r = c.request;
      EXPECT_EQ(r.layout.pp, 4);
      EXPECT_EQ(r.layout.cp, 1);
      EXPECT_FALSE(r.layout.sequence_parallel);
      EXPECT_EQ(r.plugin.effective_zero_stage(), 1);
      EXPECT_EQ(r.plugin.pp_schedule, PipelineSchedule::one_f_one_b);
      EXPECT_EQ(r.training.precision, precision);
      EXPECT_GT(c.simulation.tokens_per_s, 0) << describe_plan(r);
      EXPECT_NE(describe_plan(r).find(", zero 1, DeepSpeed's pipeline engine"), std::string::npos) << describe_plan(r);
    }
    // One data rank: its ZeRO-1 shards nothing, and the engine still runs it.
    EXPECT_TRUE(any_plan(pipelines, [](const EstimateRequest& r) { return r.layout.dp == 1; }));
  }
}

TEST(RuntimeSearch, FiltersOutsideTheRuntimeNameTheFix) {
  struct Case {
    Runtime runtime;
    std::function<void(PlanRequest&)> restrict;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Runtime::megatron, [](PlanRequest& r) { r.plugins = {PluginKind::gemini}; },
       "--runtime megatron searches hybrid_parallel plans, its model states: drop --plugin gemini"},
      {Runtime::megatron, [](PlanRequest& r) { r.zero_stage = 2; }, "--zero-stage 2 under --runtime megatron: Megatron-Core shards only the optimizer"},
      {Runtime::torchtitan, [](PlanRequest& r) { r.tp = 2; }, "--tp and --pp under --runtime torchtitan"},
      {Runtime::torchtitan, [](PlanRequest& r) { r.zero_stage = 3; }, "--zero-stage under --runtime torchtitan: FSDP2 shards every model state"},
      {Runtime::torchtitan, [](PlanRequest& r) { r.dp_replicate = 8; },
       "--dp-replicate 8 under --runtime torchtitan leaves one GPU per replica, which torchtitan runs as DDP (not modelled); use --dp-replicate 4 or less"},
      {Runtime::deepspeed, [](PlanRequest& r) { r.zero_stage = 2; }, "--runtime deepspeed models ZeRO-3: use --zero-stage 3"},
      {Runtime::torchtitan, [](PlanRequest& r) { r.recompute = {RecomputeMode::selective}; }, "is not one of torchtitan's checkpointing modes"},
      {Runtime::deepspeed, [](PlanRequest& r) { r.cp = 2; }, "--cp under --runtime deepspeed: neither its ZeRO-3 nor its pipeline engine"},
      {Runtime::deepspeed, [](PlanRequest& r) { r.pp = 2; r.precision = Precision::fp32; },
       "--runtime deepspeed --plugin hybrid_parallel (DeepSpeed's pipeline engine) is modelled in bf16 (its BF16_Optimizer) and fp16"},
      {Runtime::deepspeed, [](PlanRequest& r) { r.plugins = {PluginKind::gemini}; },
       "--runtime deepspeed searches low_level_zero,hybrid_parallel plans, its model states: drop --plugin gemini"},
      {Runtime::deepspeed, [](PlanRequest& r) { r.chunk_size = 8 << 20; }, "--chunk-size is Gemini's (ColossalAI): drop it under --runtime deepspeed"},
      {Runtime::colossalai, [](PlanRequest& r) { r.recompute = {RecomputeMode::op_selective}; },
       "--recompute op_selective is torchtitan's op-level checkpointing: add --runtime torchtitan"},
      {Runtime::torchtitan, [](PlanRequest& r) { r.grad_reduce_in_bf16 = true; }, "--grad-reduce-in-bf16 is Megatron-LM's: add --runtime megatron"},
      {Runtime::megatron, [](PlanRequest& r) { r.fp8_param_gather = true; },
       "--fp8-param-gather keeps Transformer Engine's weights in FP8 under the distributed optimizer: it needs --precision fp8"},
      {Runtime::megatron, [](PlanRequest& r) { r.grad_reduce_in_bf16 = true; r.precision = Precision::fp16; },
       "--grad-reduce-in-bf16 keeps the bf16 runs' fp32 gradient buffer in bf16: it needs --precision bf16 or fp8"},
  };
  const Model model = testing::shipped_model("llama-2-7b");
  for (const Case& c : cases) {
    PlanRequest request = under(c.runtime, "h100-80g", 8, 64, 4096);
    c.restrict(request);
    auto result = search_plans(model, request);
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_NE(result.error().message.find(c.message), std::string::npos) << result.error().message;
  }
  // Megatron-Core runs tp 1 × pp 1 itself: not refused as ColossalAI's hybrid_parallel is.
  PlanRequest plain = under(Runtime::megatron, "h100-80g", 8, 64, 4096);
  plain.plugins = {PluginKind::hybrid_parallel};
  plain.tp = 1;
  plain.pp = 1;
  EXPECT_TRUE(search_plans(model, plain).ok());
}

}  // namespace
}  // namespace tessera::planner
