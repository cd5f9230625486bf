// What Megatron-Core keeps from one step into the next besides the model
// states (planner/src/retained_between_steps.cpp): each receiving model chunk's
// last input and its gradient, (s/cp, b, h) each in the 16-bit dtype, s/tp rows
// under sequence parallelism. Every byte count is worked out by hand.
#include <gtest/gtest.h>

#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

// GPT-2 medium (24 blocks, hidden 1024), 4 stages, micro-batch 2 × 1024 tokens
// in bf16: one stage input is 2 · 1024 · 1024 · 2 B = 4 MiB.
constexpr int64_t kInput = 2 * 1024 * 1024 * 2;

EstimateRequest pipeline(Runtime runtime, int64_t chunks) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.runtime = runtime;
  r.layout = ParallelLayout{1, 1, 4, false};
  r.training.micro_batch_size = 2;
  r.training.num_micro_batches = 8;
  r.training.seq_len = 1024;
  if (chunks > 1) {
    r.plugin.pp_schedule = PipelineSchedule::interleaved;
    r.plugin.num_model_chunks = chunks;
  }
  return r;
}

std::vector<int64_t> retained_per_stage(const EstimateRequest& r) {
  const MemoryEstimate e = estimate_or_fail(shipped_model("gpt2-medium"), shipped_gpu("h100-80g"), r);
  std::vector<int64_t> out;
  for (const RankMemory& row : e.ranks) {
    for (int stage = row.first_stage; stage <= row.last_stage; ++stage) out.push_back(row.retained_between_steps);
  }
  return out;
}

TEST(RetainedBetweenSteps, OneStagesInputAndGradientAfterTheFirstStage) {
  EXPECT_EQ(retained_per_stage(pipeline(Runtime::megatron, 1)), (std::vector<int64_t>{0, 2 * kInput, 2 * kInput, 2 * kInput}));
}

// Interleaved with 2 chunks of 3 blocks: the first stage's second chunk
// receives from the last stage, every other stage's two chunks from their predecessor.
TEST(RetainedBetweenSteps, EveryReceivingChunkWhenInterleaved) {
  EXPECT_EQ(retained_per_stage(pipeline(Runtime::megatron, 2)), (std::vector<int64_t>{2 * kInput, 4 * kInput, 4 * kInput, 4 * kInput}));
}

TEST(RetainedBetweenSteps, ARanksShareOfTheSequence) {
  EstimateRequest sp = pipeline(Runtime::megatron, 1);
  sp.layout = ParallelLayout{1, 2, 4, true};  // sequence parallel over tp 2: 512 rows each
  EXPECT_EQ(retained_per_stage(sp).back(), kInput);
  EstimateRequest cp = pipeline(Runtime::megatron, 1);
  cp.layout.cp = 2;  // 512 tokens each
  EXPECT_EQ(retained_per_stage(cp).back(), kInput);
}

// Only Megatron-Core's schedule is read; without a pipeline nothing is received.
TEST(RetainedBetweenSteps, NothingElsewhere) {
  EXPECT_EQ(retained_per_stage(pipeline(Runtime::colossalai, 1)), (std::vector<int64_t>{0, 0, 0, 0}));
  EstimateRequest single = pipeline(Runtime::megatron, 1);
  single.layout.pp = 1;
  EXPECT_EQ(retained_per_stage(single), (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace tessera::planner
