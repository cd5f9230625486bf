// What the GPU step runs of a pipeline (device/gpu_plugins.h): hybrid_parallel's,
// GPipe, 1F1B or interleaved, at ZeRO stage 0 or 1, with or without tensor
// parallelism; and of context parallelism: hybrid_parallel's, beside data,
// tensor and pipeline parallelism; each refusal one line naming the option and
// the fix. Built without CUDA too.
#include "tessera/engine/device/gpu_plugins.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::engine {
namespace {

// hybrid_parallel with `schedule` (interleaved: 2 model chunks per stage).
planner::PluginOptions hybrid(planner::PipelineSchedule schedule, int zero_stage = 0) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.pp_schedule = schedule;
  plugin.num_model_chunks = schedule == planner::PipelineSchedule::interleaved ? 2 : 1;
  plugin.zero_stage = zero_stage;
  return plugin;
}

std::string refusal(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  const Status s = check_gpu_layout(plugin, layout);
  return s.ok() ? "" : s.error().message;
}

TEST(GpuPlugins, PipelinesAreHybridParallelsAtZeroStage0Or1) {
  using S = planner::PipelineSchedule;
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b), {2, 1, 2, false}), "");
  EXPECT_EQ(refusal(hybrid(S::gpipe), {1, 2, 4, true}), "");
  planner::PluginOptions ddp = hybrid(S::one_f_one_b);
  ddp.kind = planner::PluginKind::torch_ddp;
  EXPECT_EQ(refusal(ddp, {1, 1, 2, false}), "--pp 2: pipeline parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b, 1), {2, 1, 2, false}), "");
  EXPECT_EQ(refusal(hybrid(S::gpipe, 1), {2, 2, 2, true}), "");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b, 2), {2, 1, 2, false}),
            "--zero-stage 2 cannot be combined with --pp 2 (pipeline micro-batches accumulate whole gradients, and no runtime runs it: ColossalAI and "
            "DeepSpeed's pipelines take ZeRO stage 0 or 1); use --zero-stage 1 or 0");
  EXPECT_EQ(refusal(hybrid(S::interleaved), {1, 1, 4, false}), "");
  EXPECT_EQ(refusal(hybrid(S::interleaved, 1), {2, 2, 2, true}), "");
  planner::PluginOptions one_chunk = hybrid(S::interleaved);
  one_chunk.num_model_chunks = 1;
  const std::string chunks = "--pp 2: the interleaved schedule runs 2 or more model chunks per stage, the others one; set --model-chunks with "
                             "--pp-schedule interleaved only";
  EXPECT_EQ(refusal(one_chunk, {1, 1, 2, false}), chunks);
  planner::PluginOptions chunked = hybrid(S::one_f_one_b);
  chunked.num_model_chunks = 2;
  EXPECT_EQ(refusal(chunked, {1, 1, 2, false}), chunks);
  planner::PluginOptions overlap = hybrid(S::one_f_one_b);
  overlap.tp_comm_overlap = true;  // the GPU step runs it (model/sequence_overlap.h)
  EXPECT_EQ(refusal(overlap, {1, 2, 2, true}), "");
}

TEST(GpuPlugins, ContextParallelismIsHybridParallelsBesideDataTensorAndPipelineParallelism) {
  using S = planner::PipelineSchedule;
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b), {2, 1, 1, false, 2}), "");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b), {1, 2, 1, false, 2}), "");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b, 2), {2, 2, 1, true, 2}), "");
  planner::PluginOptions overlap = hybrid(S::one_f_one_b, 1);
  overlap.tp_comm_overlap = true;
  EXPECT_EQ(refusal(overlap, {1, 2, 1, true, 4}), "");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b), {1, 2, 2, false, 2}), "");
  EXPECT_EQ(refusal(hybrid(S::gpipe, 1), {2, 1, 2, false, 4}), "");
  EXPECT_EQ(refusal(hybrid(S::interleaved), {1, 2, 2, true, 2}), "");
  EXPECT_EQ(refusal(hybrid(S::one_f_one_b, 2), {1, 1, 2, false, 2}),
            "--zero-stage 2 cannot be combined with --pp 2 (pipeline micro-batches accumulate whole gradients, and no runtime runs it: ColossalAI and "
            "DeepSpeed's pipelines take ZeRO stage 0 or 1); use --zero-stage 1 or 0");
  planner::PluginOptions ddp = hybrid(S::one_f_one_b);
  ddp.kind = planner::PluginKind::torch_ddp;
  EXPECT_EQ(refusal(ddp, {1, 1, 1, false, 2}), "--cp 2: context parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
}

}  // namespace
}  // namespace tessera::engine
