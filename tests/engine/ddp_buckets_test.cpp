// DDP's bucket plan (parallel/ddp_buckets.h), which the CPU engine's DDP and
// the GPU step's share: the buckets' ranges and which are complete after each
// layer's backward, the schedule on which the GPU step starts each bucket's
// all-reduce (an event recorded on the compute stream after that layer).
#include "tessera/engine/parallel/ddp_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tessera/engine/comm/chunk_layout.h"
#include "tessera/planner/rank_order_reduction.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

// GPT-2 with 64 tokens, 16 wide, 2 blocks, 8 positions, its head tied to the
// embedding: wte 1024 + wpe 128 = 1152 from 0; each block 2·16 + 16·48 + 48 +
// 16·16 + 16 + 2·16 + 16·64 + 64 + 64·16 + 16 = 3280 (block 0 from 1152,
// block 1 from 4432); the final norm's 32 from 7712; 7744 in all.
planner::Model tiny() {
  planner::ModelConfig c = planner::parse_model_config(R"({"model_type":"gpt2","vocab_size":64,"n_embd":16,"n_layer":2,"n_head":2,"n_positions":8})", "tiny").value();
  return planner::make_model(c);
}

DdpBucketPlan plan(const planner::Model& model, int64_t bucket_bytes, int64_t element_bytes) {
  return DdpBucketPlan(model.inventory, planner::flat_parameter_order(model.inventory), model.parameter_count, bucket_bytes, element_bytes);
}

std::vector<std::pair<int64_t, int64_t>> ranges(const DdpBucketPlan& p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const DdpBucket& b : p.buckets()) out.emplace_back(b.begin, b.end);
  return out;
}

TEST(DdpBuckets, RangesFromTheEndOfTheFlatOrder) {
  const planner::Model model = tiny();
  ASSERT_EQ(model.parameter_count, 7744);
  // bf16: 4000 bytes are 2000 elements; fp32: 1000.
  EXPECT_EQ(ranges(plan(model, 4000, 2)), (std::vector<std::pair<int64_t, int64_t>>{{5744, 7744}, {3744, 5744}, {1744, 3744}, {0, 1744}}));
  EXPECT_EQ(plan(model, 4000, 4).buckets().size(), 8u);
  EXPECT_EQ(ranges(plan(model, 25 << 20, 2)), (std::vector<std::pair<int64_t, int64_t>>{{0, 7744}}));
  EXPECT_EQ(plan(model, 1, 2).buckets().size(), 7744u) << "a bucket holds at least one element";
}

// Backward runs the head (layer 2), block 1, block 0, then the embeddings.
TEST(DdpBuckets, WhichBucketIsCompleteAfterEachLayer) {
  const planner::Model model = tiny();
  const DdpBucketPlan p = plan(model, 4000, 2);
  EXPECT_EQ(p.complete_after(2), 0u) << "the head's final norm starts at 7712, inside the last bucket [5744, 7744)";
  EXPECT_EQ(p.complete_after(1), 1u) << "block 1 from 4432: [5744, 7744)";
  EXPECT_EQ(p.complete_after(0), 3u) << "block 0 from 1152: also [3744, 5744) and [1744, 3744)";
  EXPECT_EQ(p.complete_after(planner::kEmbeddingLayer), 4u) << "the embeddings (and the tied head) complete the first";
  // Small buckets: every one past a layer's first parameter is complete after it.
  const DdpBucketPlan fine = plan(model, 64, 2);  // 32 elements: the final norm is exactly the first bucket
  EXPECT_EQ(fine.complete_after(2), 1u);
  EXPECT_EQ(fine.complete_after(1), 1u + (7712 - 4432) / 32);
  EXPECT_EQ(fine.complete_after(0), 1u + (7712 - 1152) / 32);
  EXPECT_EQ(fine.complete_after(planner::kEmbeddingLayer), fine.buckets().size());
  // One bucket for the whole model: complete only after the embeddings.
  const DdpBucketPlan whole = plan(model, 25 << 20, 2);
  for (int layer : {2, 1, 0}) EXPECT_EQ(whole.complete_after(layer), 0u) << layer;
  EXPECT_EQ(whole.complete_after(planner::kEmbeddingLayer), 1u);
}

// The scratch the NCCL backend stages for each bucket's rank-order sum
// (comm/nccl.h: this rank's balanced chunk from every rank) is, on the rank
// with the largest chunk, what the planner counts (rank_order_reduction.h):
// for every bucket size, element width and rank count here.
TEST(DdpBuckets, TheLargestReductionScratchIsThePlanners) {
  const planner::Model model = tiny();
  for (int64_t bucket_bytes : {int64_t{1}, int64_t{4000}, int64_t{6002}, int64_t{1} << 20}) {
    for (int64_t element_bytes : {2, 4}) {
      for (int ranks = 1; ranks <= 7; ++ranks) {
        int64_t largest = 0;
        const DdpBucketPlan buckets = plan(model, bucket_bytes, element_bytes);
        for (const DdpBucket& b : buckets.buckets()) {
          const auto chunks = comm::balanced_chunks<int64_t>(static_cast<size_t>(b.end - b.begin), ranks);
          for (int64_t mine : chunks.counts) largest = std::max(largest, mine * ranks * element_bytes);
        }
        EXPECT_EQ(largest, planner::ddp_rank_order_scratch_bytes(model.parameter_count, bucket_bytes, ranks, element_bytes))
            << bucket_bytes << " bytes, " << element_bytes << " per element, " << ranks << " ranks";
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
