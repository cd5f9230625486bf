// Which Gemini chunks are gathered while layers run, and what a step costs:
// the rule the engine follows, replayed by hand on four chunks of 10 elements,
// one per layer slot (the embedding, two blocks, the head).
#include <gtest/gtest.h>

#include <algorithm>

#include "tessera/planner/gemini_gathering.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/model.h"
#include "tessera/planner/registry.h"

namespace tessera::planner {
namespace {

GeminiChunkSet four_chunks(double kept_elements, bool on_host = false) {
  return GeminiChunkSet{{10, 10, 10, 10}, {{0}, {1}, {2}, {3}}, kept_elements, std::vector<bool>(4, on_host)};
}

TEST(GeminiGathering, NothingKeptReleasesEachChunkWhenTheNextLayerRuns) {
  const GeminiChunkSet set = four_chunks(0);
  GeminiGathering g(set.chunk_capacity, set.chunks_of_layer, set.kept_gathered_elements);
  EXPECT_EQ(g.use_layer(kEmbeddingLayer, false).gathered, std::vector<int>{0});
  const GeminiGathering::Moves second = g.use_layer(0, false);
  EXPECT_EQ(second.released, std::vector<int>{0});
  EXPECT_EQ(second.gathered, std::vector<int>{1});
  g.use_layer(1, false);
  g.use_layer(2, false);
  // Backward starts at the head, whose chunk is still gathered: no gather, a gradient chunk opens.
  const GeminiGathering::Moves head = g.use_layer(2, true);
  EXPECT_TRUE(head.gathered.empty());
  EXPECT_EQ(head.gradients_opened, std::vector<int>{3});
  const GeminiGathering::Moves block = g.use_layer(1, true);
  EXPECT_EQ(block.reduced, std::vector<int>{3});  // its gradients are complete
  EXPECT_EQ(block.gathered, std::vector<int>{2});
}

TEST(GeminiGathering, ABudgetKeepsTheLatestChunksGatheredIntoBackward) {
  const GeminiChunkSet set = four_chunks(20);  // two chunks' worth
  GeminiGathering g(set.chunk_capacity, set.chunks_of_layer, set.kept_gathered_elements);
  g.use_layer(kEmbeddingLayer, false);
  EXPECT_TRUE(g.use_layer(0, false).released.empty());  // 10 left gathered, within 20
  EXPECT_TRUE(g.use_layer(1, false).released.empty());  // 20, within 20
  EXPECT_EQ(g.use_layer(2, false).released, std::vector<int>{0});  // 30: the earliest goes
  EXPECT_EQ(g.gathered(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(gathered_after_forward(set), (std::vector<bool>{false, true, true, true}));
}

TEST(GeminiGathering, ReplayCountsPeakAndTrafficOfAStep) {
  // Nothing kept: forward gathers all 4 chunks, backward 3 (the head's is still
  // there); every chunk reduced once. Peak: one chunk and its gradient in
  // backward, each growing from its 5-element shard to 10 (dp 2), 2 bytes each.
  GeminiStepReplay step = replay_gemini_step(four_chunks(0), 2, 2, 2, 1);
  EXPECT_EQ(step.gathered_elements, 70);
  EXPECT_EQ(step.forward_gathered_elements, 40);
  EXPECT_EQ(step.backward_gathered_elements, 30);
  EXPECT_EQ(step.reduced_elements, 40);
  EXPECT_EQ(step.peak_buffer_bytes, 5 * 2 + 5 * 2);
  // Two chunks' budget: chunks 1 and 2 stay gathered into backward, which then
  // gathers only chunk 0; the peak is the head's start of backward: three
  // parameter chunks and the head's gradient chunk.
  step = replay_gemini_step(four_chunks(20), 2, 2, 2, 1);
  EXPECT_EQ(step.backward_gathered_elements, 10);
  EXPECT_EQ(step.gathered_elements, 50);
  EXPECT_EQ(step.reduced_elements, 40);
  EXPECT_EQ(step.peak_buffer_bytes, 3 * 5 * 2 + 5 * 2);
  // Shards on the host: a gathered chunk is a whole new buffer.
  EXPECT_EQ(replay_gemini_step(four_chunks(0, true), 2, 2, 2, 1).peak_buffer_bytes, 10 * 2 + 10 * 2);
}

TEST(GeminiGathering, AccumulationCarriesTheEmbeddingsChunkIntoTheNextMicroBatch) {
  // Micro-batch 1: 40 + 30 gathered, chunks 3, 2, 1 reduced in backward. Chunk
  // 0 stays gathered with its gradient: micro-batch 2's forward gathers 30 and
  // reduces chunk 0 when layer 0 runs, its backward gathers 30 and reduces 3,
  // 2, 1; the step's end reduces chunk 0 again. Each later micro-batch repeats micro-batch 2.
  GeminiStepReplay step = replay_gemini_step(four_chunks(0), 2, 2, 2, 2);
  EXPECT_EQ(step.gathered_elements, 130);
  EXPECT_EQ(step.reduced_elements, 80);
  EXPECT_EQ(step.forward_gathered_elements, 30);
  step = replay_gemini_step(four_chunks(0), 2, 2, 2, 3);
  EXPECT_EQ(step.gathered_elements, 190);
  EXPECT_EQ(step.reduced_elements, 120);
}

TEST(GeminiGathering, ColossalAIsBudgetsCountAChunkOncePerTensor) {
  // gpt2-medium on 8 ranks: 7 chunks of about 51.4 Mi elements holding 292
  // tensors, so the counted total is about 15.0 Gi elements (gemini_static_placement.h).
  const Model model = load_model("gpt2-medium").value();
  GeminiOptions options;
  options.placement_policy = GeminiPlacement::static_placement;
  const ChunkLayout layout = pack_chunks(model.inventory, gemini_chunk_size(model.inventory, options, 8), 8);
  ASSERT_EQ(layout.num_chunks(), 7);
  const auto kept_chunks = [&](double shard_param_frac) {
    options.shard_param_frac = shard_param_frac;
    const GeminiChunkSet set{layout.chunk_capacity, chunks_by_layer(layout, model.inventory, static_cast<int>(model.config.num_layers)), kept_gathered_elements(layout, options),
                             std::vector<bool>(7, false)};
    const std::vector<bool> kept = gathered_after_forward(set);
    return std::count(kept.begin(), kept.end(), true);
  };
  EXPECT_EQ(kept_chunks(1), 2);      // the head slot's: the tied embedding's chunk and the final norm's
  EXPECT_EQ(kept_chunks(0.999), 2);  // 15 Mi elements: less than a chunk
  EXPECT_EQ(kept_chunks(0.99), 4);   // 150 Mi: two chunks besides the head slot's
  EXPECT_EQ(kept_chunks(0.9), 7);    // 1.5 Gi: all of them
  // offload_param_frac counts only with shard_param_frac 1 and offload_optim_frac
  // 1, and moves a chunk when its memory is above (1 - frac) × the counted total.
  options.shard_param_frac = 1;
  options.offload_optim_frac = 1;
  const auto host_chunks = [&](double offload_param_frac) {
    options.offload_param_frac = offload_param_frac;
    const std::vector<bool> host = parameter_chunks_on_host(layout, options);
    return std::count(host.begin(), host.end(), true);
  };
  EXPECT_EQ(host_chunks(0.5), 0);
  EXPECT_EQ(host_chunks(0.995), 0);  // 75 Mi elements of budget: more than a chunk
  EXPECT_EQ(host_chunks(0.998), 7);  // 30 Mi: every chunk is above it
  EXPECT_EQ(host_chunks(1), 7);
  options.offload_optim_frac = 0.5;  // ignored, as ColossalAI warns
  EXPECT_EQ(host_chunks(1), 0);
}

}  // namespace
}  // namespace tessera::planner
