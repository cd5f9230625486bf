// What the GPU step runs of a pipeline (device/gpu_plugins.h): hybrid_parallel's,
// GPipe or 1F1B, at ZeRO stage 0 or 1, with or without tensor parallelism; each
// refusal one line naming the option and the fix. Built without CUDA too.
#include "tessera/engine/device/gpu_plugins.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::engine {
namespace {

planner::PluginOptions hybrid(planner::PipelineSchedule schedule, int zero_stage = 0) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.pp_schedule = schedule;
  plugin.zero_stage = zero_stage;
  return plugin;
}

std::string refusal(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  const Status s = check_gpu_layout(plugin, layout);
  return s.ok() ? "" : s.error().message;
}

TEST(GpuPlugins, PipelinesAreHybridParallelsGpipeOr1F1BAtZeroStage0Or1) {
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
  EXPECT_EQ(refusal(hybrid(S::interleaved), {1, 1, 4, false}), "--pp 4: on GPUs a pipeline runs the gpipe and 1f1b schedules; use --pp-schedule 1f1b");
  planner::PluginOptions overlap = hybrid(S::one_f_one_b);
  overlap.tp_comm_overlap = true;
  EXPECT_NE(refusal(overlap, {1, 2, 2, true}).find("--tp-comm-overlap"), std::string::npos);
}

}  // namespace
}  // namespace tessera::engine
