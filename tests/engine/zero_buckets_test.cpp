// ZeRO-1/2's reduction book (parallel/zero_buckets.h), which the CPU
// engine's low_level_zero and the GPU step's share: the stage-1 pieces, and
// the stage-2 bucket's placements and flushes in backward's layer order, the
// schedule on which the GPU step issues its copies and reduce-scatters. The
// CPU engine runs on these very calls (tests/parallel/data_parallel_test.cpp
// checks its ZeRO against DDP on 2 and 4 ranks).
#include "tessera/engine/parallel/zero_buckets.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

// GPT-2 with 64 tokens, 16 wide, 2 blocks, 8 positions, its head tied to the
// embedding (tests/engine/ddp_buckets_test.cpp's): wte 1024 from 0 and wpe
// 128; blocks of 3280 from 1152 and 4432; the final norm's 16 + 16 from 7712;
// 7744 in all. Backward's layers: the head (2: the final norm and the tied
// wte's alias, 1056), block 1, block 0, the embeddings (-1: 1152).
planner::Model tiny() {
  planner::ModelConfig c = planner::parse_model_config(R"({"model_type":"gpt2","vocab_size":64,"n_embd":16,"n_layer":2,"n_head":2,"n_positions":8})", "tiny").value();
  return planner::make_model(c);
}

Zero2Bucket bucket(const planner::Model& model, int64_t bucket_numel, int64_t dp, int64_t rank) {
  return Zero2Bucket(model.inventory, planner::flat_parameter_order(model.inventory), planner::zero2_bucket_numel(model.inventory, bucket_numel, dp), dp,
                     rank);
}

TEST(ZeroBuckets, Stage1PiecesCoverTheShardInBucketSizedSteps) {
  // 7744 over 2 ranks: shards of 3872; a bucket of 1000 takes 500 of each rank's shard at a time.
  const std::vector<Zero1Piece> pieces = zero1_pieces(3872, 1000, 2);
  ASSERT_EQ(pieces.size(), 8u);
  for (size_t k = 0; k < 7; ++k) {
    EXPECT_EQ(pieces[k].begin, static_cast<int64_t>(k) * 500);
    EXPECT_EQ(pieces[k].numel, 500);
  }
  EXPECT_EQ(pieces.back().begin, 3500);
  EXPECT_EQ(pieces.back().numel, 372);
  // A bucket as large as the padded model: one piece, the whole shard.
  const std::vector<Zero1Piece> whole = zero1_pieces(2582, planner::zero_bucket_numel(1 << 30, 7744, 3), 3);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].numel, 2582);
}

TEST(ZeroBuckets, Stage2PlacesTheHeadThenFlushesBeforeABlockThatDoesNotFit) {
  const planner::Model model = tiny();
  Zero2Bucket b = bucket(model, 4000, 2, 1);
  ASSERT_EQ(b.numel(), 4000);
  EXPECT_FALSE(b.needs_flush(2));
  const std::vector<Zero2Placement> head = b.place(2);
  // Just below the bucket's end, in flat order: the tied wte, then the final norm.
  ASSERT_EQ(head.size(), 3u);
  EXPECT_EQ(head[0].parameter, 0);
  EXPECT_EQ(head[0].bucket_offset, 2944);
  EXPECT_EQ(head[0].numel, 1024);
  EXPECT_EQ(head[1].bucket_offset, 3968);
  EXPECT_EQ(head[2].bucket_offset, 3984);
  EXPECT_TRUE(b.needs_flush(1)) << "block 1's 3280 do not fit in the 2944 left";
  const std::vector<Zero2Run> runs = b.flush();
  // Two runs of the flat order: wte [0, 1024), all rank 0's; the final norm [7712, 7744), all rank 1's.
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].bucket_offset, 2944);
  EXPECT_EQ(runs[0].counts, (std::vector<size_t>{1024, 0}));
  EXPECT_EQ(runs[0].mine_numel, 0);
  EXPECT_EQ(runs[1].bucket_offset, 3968);
  EXPECT_EQ(runs[1].counts, (std::vector<size_t>{0, 32}));
  EXPECT_EQ(runs[1].mine_in_bucket, 3968);
  EXPECT_EQ(runs[1].mine_in_shard, 7712 - 3872);
  EXPECT_EQ(runs[1].mine_numel, 32);
  EXPECT_FALSE(b.needs_flush(1)) << "a flush empties the bucket";
}

// Over a whole backward, on every rank of 2 and 3: each run's counts split it
// by the shard rule, each rank's part lies inside the run and its shard, and
// every parameter's gradient is reduced once (the tied wte twice: at the head
// and at the embeddings), its elements added into the shard that owns them.
TEST(ZeroBuckets, Stage2BackwardReducesEveryGradientIntoItsOwnersShard) {
  const planner::Model model = tiny();
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  for (const int64_t dp : {2, 3}) {
    const int64_t shard = planner::shard_numel(model.parameter_count, dp);
    std::vector<int> received(static_cast<size_t>(model.parameter_count), 0);  // per flat element, over the ranks
    for (int64_t rank = 0; rank < dp; ++rank) {
      Zero2Bucket b = bucket(model, 1500, dp, rank);
      std::vector<int64_t> flat_at(static_cast<size_t>(b.numel()), -1);  // which flat element each bucket slot holds
      const auto flush = [&] {
        for (const Zero2Run& run : b.flush()) {
          const auto total = static_cast<int64_t>(std::accumulate(run.counts.begin(), run.counts.end(), size_t{0}));
          const int64_t first = flat_at[static_cast<size_t>(run.bucket_offset)];
          for (int64_t i = 0; i < total; ++i) ASSERT_EQ(flat_at[static_cast<size_t>(run.bucket_offset + i)], first + i) << "a run is one range of the flat order";
          ASSERT_EQ(run.mine_numel, static_cast<int64_t>(run.counts[static_cast<size_t>(rank)]));
          for (int64_t j = 0; j < run.mine_numel; ++j) {
            const int64_t flat = flat_at[static_cast<size_t>(run.mine_in_bucket + j)];
            ASSERT_EQ(flat, rank * shard + run.mine_in_shard + j) << "the part lands on its own element of the shard";
            ++received[static_cast<size_t>(flat)];
          }
        }
      };
      for (int layer = static_cast<int>(model.config.num_layers); layer >= planner::kEmbeddingLayer; --layer) {
        if (b.needs_flush(layer)) flush();
        for (const Zero2Placement& placed : b.place(layer)) {
          for (int64_t j = 0; j < placed.numel; ++j) flat_at[static_cast<size_t>(placed.bucket_offset + j)] = order[static_cast<size_t>(placed.parameter)].offset + j;
        }
      }
      flush();
    }
    for (int64_t i = 0; i < model.parameter_count; ++i) ASSERT_EQ(received[static_cast<size_t>(i)], i < 1024 ? 2 : 1) << "dp " << dp << ", element " << i;
  }
}

// The 16-bit buffers the GPU step's ZeRO allocates (cuda/zero_shards.h) are
// the planner's estimate of the same run, category by category, for both
// stages, both kinds of stage-2 bucket, and with the optimizer offloaded.
TEST(ZeroBuckets, BuffersAreThePlannersEstimate) {
  const planner::Model model = tiny();
  auto gpu = planner::load_gpu("h100-80g");
  ASSERT_TRUE(gpu.ok());
  for (const int64_t dp : {2, 3}) {
    for (const auto& [stage, bucket, offload] : {std::tuple{1, int64_t{1000}, false}, std::tuple{2, int64_t{1} << 30, false},
                                                 std::tuple{2, int64_t{1500}, false}, std::tuple{2, int64_t{1500}, true}}) {
      planner::EstimateRequest request;
      request.layout.dp = dp;
      request.plugin.kind = planner::PluginKind::low_level_zero;
      request.plugin.zero_stage = stage;
      request.plugin.reduce_bucket_numel = bucket;
      request.plugin.cpu_offload = offload;
      request.training.precision = planner::Precision::bf16;
      request.training.micro_batch_size = 1;
      request.training.seq_len = 8;
      auto estimate = planner::estimate_memory(model, gpu.value(), request);
      ASSERT_TRUE(estimate.ok()) << estimate.error().message;
      const planner::RankMemory& row = estimate->ranks.at(0);
      const ZeroBuffers b = zero_buffers(model, request.plugin, dp);
      const bool full_is_bucket = b.full_gradients_category == MemoryCategory::comm_buffers;
      const std::string what = "dp " + std::to_string(dp) + ", stage " + std::to_string(stage) + ", bucket " + std::to_string(bucket);
      EXPECT_EQ(row.bytes[MemoryCategory::parameters].device, 2 * b.parameters) << what;
      EXPECT_EQ(row.bytes[MemoryCategory::gradients].device, 2 * ((full_is_bucket ? 0 : b.full_gradients) + b.gradient_shard)) << what;
      EXPECT_EQ(row.bytes[MemoryCategory::comm_buffers].device, 2 * ((full_is_bucket ? b.full_gradients : 0) + b.buckets_numel())) << what;
      EXPECT_EQ(b.bucket > 0 && stage == 2, bucket == 1500) << what << ": the smaller stage-2 bucket is filled a layer at a time";
    }
  }
}

}  // namespace
}  // namespace tessera::engine
