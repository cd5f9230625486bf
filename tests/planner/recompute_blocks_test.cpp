// Full recompute of some blocks (--recompute full --recompute-num-layers K,
// recompute_blocks.h): which blocks, what they keep, what backward runs again,
// how the search picks K, and how Megatron-LM and torchtitan are told.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planned.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/export.h"
#include "tessera/planner/flops.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/tp_traffic.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;

TrainingOptions full_of(int64_t blocks) {
  TrainingOptions t;
  t.recompute = RecomputeMode::full;
  t.recompute_num_layers = blocks;
  return t;
}

// Llama 3 8B's request at 8,192 tokens under torchtitan, `blocks` recomputed whole.
EstimateRequest torchtitan_llama(RecomputeMode recompute, int64_t blocks) {
  EstimateRequest r = testing::torchtitan_fsdp(8192, recompute);
  r.training.recompute_num_layers = blocks;
  return r;
}

int64_t activation_bytes(const Model& model, const EstimateRequest& r) {
  return testing::estimate_or_fail(model, shipped_gpu("h100-80g"), r).ranks.front().bytes[MemoryCategory::activations].device;
}

TEST(RecomputeBlocks, TheFirstBlocksOfEachChunk) {
  EXPECT_TRUE(block_recomputed_whole(full_of(0), 31));  // 0: every block
  EXPECT_TRUE(block_recomputed_whole(full_of(3), 2));
  EXPECT_FALSE(block_recomputed_whole(full_of(3), 3));
  TrainingOptions selective = full_of(0);
  selective.recompute = RecomputeMode::selective;
  EXPECT_FALSE(block_recomputed_whole(selective, 0));
  EXPECT_EQ(blocks_recomputed_whole(full_of(3), 2), 2);  // a chunk of fewer blocks recomputes them all
  EXPECT_EQ(blocks_recomputed_whole(full_of(0), 7), 7);
  // BLOOM-176B's 70 blocks on 12 stages: 5, 6 × 10, 5; 6 of a stage's recomputes 5 of the first.
  const std::vector<StageLayers> first = stage_chunks(70, 12, 1).front();
  EXPECT_EQ(blocks_recomputed_whole(full_of(6), first), 5);
  EXPECT_EQ(blocks_recomputed_whole(full_of(4), stage_chunks(70, 12, 1)[1]), 4);
}

EstimateRequest under(Runtime runtime, PluginKind plugin, int64_t pp) {
  EstimateRequest r;
  r.plugin.runtime = runtime;
  r.plugin.kind = plugin;
  r.layout.pp = pp;
  return r;
}

TEST(RecomputeBlocks, TheCountsEachRuntimeCanRecompute) {
  const ModelConfig llama = shipped_model("llama-3-8b").config;
  // Megatron: any count below a chunk's blocks (8 stages of 4).
  EXPECT_EQ(partial_recompute_counts(llama, under(Runtime::megatron, PluginKind::hybrid_parallel, 8)), (std::vector<int64_t>{1, 2, 3}));
  // torchtitan: every n-th of 32 blocks, ⌊32/n⌋ of them.
  EXPECT_EQ(partial_recompute_counts(llama, under(Runtime::torchtitan, PluginKind::torch_fsdp, 1)), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 8, 10, 16}));
  // ColossalAI: its pipelines of Llama, Mistral and Qwen2 only.
  EXPECT_EQ(partial_recompute_counts(llama, under(Runtime::colossalai, PluginKind::hybrid_parallel, 8)), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(partial_recompute_counts(llama, under(Runtime::colossalai, PluginKind::hybrid_parallel, 1)).empty());
  EXPECT_TRUE(partial_recompute_counts(llama, under(Runtime::colossalai, PluginKind::torch_fsdp, 1)).empty());
  EXPECT_TRUE(partial_recompute_counts(shipped_model("gpt2").config, under(Runtime::colossalai, PluginKind::hybrid_parallel, 4)).empty());
  EXPECT_TRUE(partial_recompute_counts(llama, under(Runtime::deepspeed, PluginKind::low_level_zero, 1)).empty());
  EXPECT_EQ(layer_checkpoint_frequency(32, 16), 2);
  EXPECT_EQ(layer_checkpoint_frequency(40, 20), 2);
  EXPECT_EQ(layer_checkpoint_frequency(32, 10), 3);
  EXPECT_EQ(layer_checkpoint_frequency(32, 7), std::nullopt);
}

// Llama 3 8B at 8,192 tokens: K blocks keep their input, the other 32 − K all
// they save (torchtitan's eager block, activations_torchtitan.h).
TEST(RecomputeBlocks, ActivationsAreTheRecomputedBlocksInputsAndTheOthersWhole) {
  const Model model = shipped_model("llama-3-8b");
  const ActivationTable table = activation_table(model.config, ActivationProfile::flash, Precision::bf16, kMeasuredTransformers, BlockAccounting::torchtitan_eager);
  const ActivationShape shape{1, 8192, 1, false};
  const int64_t whole = block_activation_bytes(table, shape, RecomputeMode::none).stash;
  const int64_t input = block_activation_bytes(table, shape, RecomputeMode::full).stash;
  EXPECT_EQ(input, 8192 * 4096 * 2);
  const int64_t all = activation_bytes(model, torchtitan_llama(RecomputeMode::full, 0));
  for (int64_t k : {1, 5, 10, 16}) {  // counts torchtitan can run (every 32nd, 6th, 3rd, 2nd block)
    EXPECT_EQ(activation_bytes(model, torchtitan_llama(RecomputeMode::full, k)) - all, (32 - k) * (whole - input)) << k;
  }
  EXPECT_EQ(activation_bytes(model, torchtitan_llama(RecomputeMode::full, 32)), all);
  }

TEST(RecomputeBlocks, BackwardRunsTheRecomputedBlocksAgain) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 8, 8, 400).value();
  const auto simulated = [&](const EstimateRequest& r) {
    return simulate_step(model, cluster, r, testing::estimate_or_fail(model, h100, r), SimulationSettings{}, false).value();
  };
  const StepSimulation all = simulated(torchtitan_llama(RecomputeMode::full, 0));
  const StepSimulation half = simulated(torchtitan_llama(RecomputeMode::full, 16));
  const StepSimulation none = simulated(torchtitan_llama(RecomputeMode::none, 0));
  EXPECT_DOUBLE_EQ(half.breakdown.recompute_s, 0.5 * all.breakdown.recompute_s);
  EXPECT_LT(none.step_time_s, half.step_time_s);
  EXPECT_LT(half.step_time_s, all.step_time_s);
  // FLOPs: 16 blocks' forward again; MFU counts none of it, hardware FLOPs all of it.
  const double block = block_forward_flops_per_token(model, 0, 8192);
  EXPECT_DOUBLE_EQ(flops_per_token(model, torchtitan_llama(RecomputeMode::full, 16)).recompute, 16 * block);
  EXPECT_DOUBLE_EQ(flops_per_token(model, torchtitan_llama(RecomputeMode::full, 0)).recompute, flops_per_token(model, 8192, RecomputeMode::full).recompute);
  // Under tensor parallelism each recomputed block calls its forward's two collectives again.
  const ModelConfig& c = model.config;
  const TpMicroBatchTraffic some = tp_micro_batch_traffic(c, TpStage{32, true, true, 5}, 1, 1024, false, RecomputeMode::full, 2);
  const TpMicroBatchTraffic every = tp_micro_batch_traffic(c, TpStage{32}, 1, 1024, false, RecomputeMode::full, 2);
  EXPECT_EQ(every.backward.all_reduce.calls - some.backward.all_reduce.calls, 2 * (32 - 5));
}

TEST(RecomputeBlocks, RefusalsNameTheFix) {
  const Model model = shipped_model("llama-3-8b");
  const auto refusal = [&](const EstimateRequest& r) {
    const Status s = validate_request(model, shipped_gpu("h100-80g"), r);
    return s ? std::string() : s.error().message;
  };
  EXPECT_EQ(refusal(torchtitan_llama(RecomputeMode::full, 16)), "");
  EXPECT_NE(refusal(torchtitan_llama(RecomputeMode::none, 16)).find("add --recompute full (got --recompute none)"), std::string::npos);
  EXPECT_NE(refusal(torchtitan_llama(RecomputeMode::full, 33)).find("exceeds the 32 layers of llama-3-8b; use at most 32"), std::string::npos);
  EXPECT_NE(refusal(torchtitan_llama(RecomputeMode::full, -1)).find("--recompute-num-layers must be a positive count"), std::string::npos);
  // torchtitan recomputes every n-th block: 9 of 32 is no ⌊32/n⌋.
  EXPECT_EQ(refusal(torchtitan_llama(RecomputeMode::full, 9)),
            "--recompute-num-layers 9: torchtitan's selective_ac_option n recomputes every n-th block, ⌊32/n⌋ of the 32; use one of 1, 2, 3, 4, 5, 6, "
            "8, 10, 16, or 0 for every block");
}

// Where recompute none does not fit and full does, the search adds the fewest
// blocks that fit, which torchtitan can recompute, and the plan runs faster.
TEST(RecomputeBlocks, TheSearchRecomputesTheFewestBlocksThatFit) {
  const Planned planned = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.runtime = Runtime::torchtitan;
    r.seq_len = 8192;
    r.global_batch_size = 32;
    r.micro_batch_size = 1;
  });
  const std::vector<int64_t> torchtitan_counts = partial_recompute_counts(planned.model.config, under(Runtime::torchtitan, PluginKind::torch_fsdp, 1));
  bool found = false;
  for (const Candidate& c : planned.candidates) {
    const int64_t k = c.request.training.recompute_num_layers;
    if (k == 0) continue;
    found = true;
    EXPECT_NE(std::find(torchtitan_counts.begin(), torchtitan_counts.end(), k), torchtitan_counts.end()) << k;
    // One fewer of torchtitan's counts does not fit; recomputing every block is slower.
    EstimateRequest fewer = c.request;
    const auto at = std::find(torchtitan_counts.begin(), torchtitan_counts.end(), k);
    if (at == torchtitan_counts.begin()) {
      fewer.training.recompute = RecomputeMode::none;
      fewer.training.recompute_num_layers = 0;
    } else {
      fewer.training.recompute_num_layers = *(at - 1);
    }
    EXPECT_FALSE(testing::estimate_or_fail(planned.model, shipped_gpu("h100-80g"), fewer).fits()) << describe_plan(fewer);
    const auto all = std::find_if(planned.candidates.begin(), planned.candidates.end(), [&](const Candidate& o) {
      return o.request.training.recompute == RecomputeMode::full && o.request.training.recompute_num_layers == 0 &&
             o.request.plugin.fsdp_strategy == c.request.plugin.fsdp_strategy && o.request.plugin.cpu_offload == c.request.plugin.cpu_offload;
    });
    ASSERT_NE(all, planned.candidates.end());
    EXPECT_GT(c.simulation.tokens_per_s, all->simulation.tokens_per_s) << describe_plan(c.request) << " against " << describe_plan(all->request);
    EXPECT_NE(describe_plan(c.request).find("recompute full (" + std::to_string(k) + " blocks)"), std::string::npos) << describe_plan(c.request);
  }
  EXPECT_TRUE(found);
  // --recompute full alone means every block.
  const Planned every_block = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.runtime = Runtime::torchtitan;
    r.seq_len = 8192;
    r.global_batch_size = 32;
    r.recompute = {RecomputeMode::full};
  });
  for (const Candidate& c : every_block.candidates) EXPECT_EQ(c.request.training.recompute_num_layers, 0) << describe_plan(c.request);
  // Under ColossalAI only its Llama, Mistral and Qwen2 pipelines recompute some blocks.
  const Planned colossalai = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.seq_len = 8192;
    r.global_batch_size = 32;
  });
  for (const Candidate& c : colossalai.candidates) {
    if (c.request.training.recompute_num_layers == 0) continue;
    EXPECT_TRUE(c.request.plugin.kind == PluginKind::hybrid_parallel && c.request.layout.pp > 1) << describe_plan(c.request);
  }
}

// A row recomputing some blocks names as its largest micro-batch one that fits
// with its own count of blocks recomputed, not with more.
TEST(RecomputeBlocks, ThePartialRowsLargestMicroBatchFitsWithItsOwnCount) {
  // Llama 3 70B at tp 4 × pp 4 on 64 H100s: 3 blocks of each stage's 20 fit micro-batch 1; micro-batch 8 needs more.
  const Planned planned = plan_for("llama-3-70b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.tp = 4;
    r.pp = 4;
    r.seq_len = 8192;
    r.global_batch_size = 128;
  }, 64);
  bool found = false;
  for (const Candidate& c : planned.candidates) {
    if (c.request.training.recompute_num_layers == 0) continue;
    found = true;
    EstimateRequest largest = c.request;
    largest.training.micro_batch_size = c.max_micro_batch_that_fits;
    largest.training.num_micro_batches = c.request.training.micro_batch_size * c.request.training.num_micro_batches / c.max_micro_batch_that_fits;
    EXPECT_TRUE(testing::estimate_or_fail(planned.model, shipped_gpu("h100-80g"), largest).fits()) << describe_plan(largest);
  }
  EXPECT_TRUE(found);
}

TEST(RecomputeBlocks, AGivenCountReachesEveryPlanAndItsExport) {
  const Planned megatron = plan_for("llama-2-70b", [](PlanRequest& r) {
    r.runtime = Runtime::megatron;
    r.tp = 4;
    r.pp = 4;
    r.global_batch_size = 256;
    r.seq_len = 4096;
    r.recompute = {RecomputeMode::full};
    r.recompute_num_layers = 3;
  }, 64);
  for (const EstimateRequest& r : megatron.file.plans) EXPECT_EQ(r.training.recompute_num_layers, 3) << describe_plan(r);
  expect_lines(exported(export_megatron, megatron, 0),
               {"--recompute-granularity full\n", "--recompute-method block  # the first blocks of each model chunk", "--recompute-num-layers 3\n"});
  const auto torchtitan = [](int64_t k) {
    return plan_for("llama-3-8b", [&](PlanRequest& r) {
      r.runtime = Runtime::torchtitan;
      r.seq_len = 8192;
      r.recompute = {RecomputeMode::full};
      r.recompute_num_layers = k;
    });
  };
  expect_lines(exported(export_torchtitan, torchtitan(16), 0), {"mode = \"selective\"\nselective_ac_option = \"2\"  # each n-th block recomputed whole, n = 2: 16 of 32 blocks"});
  // A count torchtitan cannot give is refused before any plan is made.
  PlanRequest seven;
  seven.cluster = make_cluster(shipped_gpu("h100-80g"), 8, 8, 400).value();
  seven.runtime = Runtime::torchtitan;
  seven.global_batch_size = 64;
  seven.seq_len = 8192;
  seven.recompute = {RecomputeMode::full};
  seven.recompute_num_layers = 7;
  auto refused = search_plans(shipped_model("llama-3-8b"), seven);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("use one of 1, 2, 3, 4, 5, 6, 8, 10, 16, or 0 for every block"), std::string::npos) << refused.error().message;
  // ColossalAI: a Llama pipeline's plugin gets the count of every virtual stage
  // (Llama 3 8B's 32 blocks on 4 stages × 2 chunks: 4 each, 3 of them recomputed);
  // a plan without a pipeline is refused, and so is a DeepSpeed config.
  const Planned pipeline = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.seq_len = 8192;
    r.plugins = {PluginKind::hybrid_parallel};
    r.tp = 2;
    r.pp = 4;
    r.pp_schedule = PipelineSchedule::interleaved;
    r.recompute = {RecomputeMode::full};
    r.recompute_num_layers = 3;
  });
  const size_t two_chunks = find_plan(pipeline, [](const EstimateRequest& r) { return r.plugin.num_model_chunks == 2; });
  expect_lines(exported(export_colossalai, pipeline, two_chunks),
               {"from colossalai.shardformer.shard.grad_ckpt_config import PipelineGradientCheckpointConfig\n",
                "gradient_checkpoint_config=PipelineGradientCheckpointConfig(num_ckpt_layers_per_stage=[3, 3, 3, 3, 3, 3, 3, 3])",
                "model.gradient_checkpointing_enable(", "recompute full (3 blocks per model chunk)"});
  const Planned fsdp = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.seq_len = 8192;
    r.plugins = {PluginKind::torch_fsdp};
    r.recompute = {RecomputeMode::full};
    r.recompute_num_layers = 16;
  });
  auto script = export_plan(fsdp.file, 0, ExportTarget::colossalai);
  ASSERT_FALSE(script.ok());
  EXPECT_NE(script.error().message.find("plan again with --plugin hybrid_parallel and --pp 2 or more, or with --recompute-num-layers 0"), std::string::npos)
      << script.error().message;
  auto config = export_plan(fsdp.file, 0, ExportTarget::deepspeed);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("which a DeepSpeed config does not set up"), std::string::npos) << config.error().message;
}

}  // namespace
}  // namespace tessera::planner
