// The gradient-accumulation rule the CPU trainer and the GPU step share
// (gradient_accumulation.h) and the data each micro-batch of a rank reads
// (DataLoader::read_rank_share, the GPU loop's reader): checked here because
// the GPU step that uses them has never run on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "tessera/engine/data.h"
#include "tessera/engine/gradient_accumulation.h"

namespace tessera::engine {
namespace {

TEST(GradientAccumulation, EachMicroBatchCountsOneOverKTimesRanks) {
  EXPECT_EQ(micro_batch_gradient_scale(1.0, 1, 1), 1.0);
  EXPECT_EQ(micro_batch_gradient_scale(1.0, 2, 1), 0.5);
  EXPECT_EQ(micro_batch_gradient_scale(1.0, 4, 8), 1.0 / 32);
  EXPECT_EQ(micro_batch_gradient_scale(65536.0, 4, 2), 8192.0);  // fp16's loss scale multiplies it
  // The bits the CPU trainer computed before the rule was shared: loss scale / k · (1 / n).
  for (int64_t k : {1, 3, 7}) {
    for (int64_t n : {1, 3, 6}) {
      EXPECT_EQ(micro_batch_gradient_scale(1024.0, k, n), 1024.0 / static_cast<double>(k) * (1.0 / static_cast<double>(n))) << k << " " << n;
    }
  }
}

TEST(GradientAccumulation, OnlyTheLastMicroBatchReduces) {
  EXPECT_TRUE(reduces_in_backward(0, 1));
  std::vector<int64_t> reducing;
  for (int64_t micro = 0; micro < 4; ++micro) {
    if (reduces_in_backward(micro, 4)) reducing.push_back(micro);
  }
  EXPECT_EQ(reducing, std::vector<int64_t>{3});
}

TEST(GradientAccumulation, TheStepsLossIsTheMeanOverMicroBatches) {
  double loss = 0;
  for (double micro_loss : {2.0, 4.0, 9.0}) loss = add_micro_batch_loss(loss, micro_loss, 3);
  EXPECT_DOUBLE_EQ(loss, 5.0);
}

// A dataset of tokens 0..n-1, so each token says where it was read.
TokenDataset counting(int32_t n) {
  TokenDataset data;
  data.tokens.resize(static_cast<size_t>(n));
  std::iota(data.tokens.begin(), data.tokens.end(), 0);
  data.vocab_size = n;
  return data;
}

// 2 ranks × 3 micro-batches of (2, 4): rank r's micro-batch m starts at
// step_start + (r·3 + m)·8, as one rank reading all 6 micro-batches would see
// them, wrapping at the end; the loader is left at the next step's start.
TEST(GradientAccumulation, EachRankReadsItsShareOfTheGlobalBatch) {
  const TokenDataset data = counting(100);
  const int64_t B = 2, T = 4, k = 3, ranks = 2, micro_tokens = B * T;
  for (int64_t step_start : {0, 40, 90}) {
    DataLoader whole(data, B, T, step_start);
    for (int64_t rank = 0; rank < ranks; ++rank) {
      DataLoader loader(data, B, T);
      std::vector<int32_t> tokens(static_cast<size_t>(k * micro_tokens)), targets(tokens.size());
      loader.read_rank_share(step_start, rank, ranks, k, tokens.data(), targets.data());
      EXPECT_EQ(loader.position(), (step_start + ranks * k * micro_tokens) % 100);
      for (int64_t micro = 0; micro < k; ++micro) {
        std::vector<int32_t> want_tokens(static_cast<size_t>(micro_tokens)), want_targets(want_tokens.size());
        whole.next(want_tokens.data(), want_targets.data());
        const auto first = tokens.begin() + micro * micro_tokens, first_target = targets.begin() + micro * micro_tokens;
        EXPECT_EQ(std::vector<int32_t>(first, first + micro_tokens), want_tokens) << "rank " << rank << " micro-batch " << micro;
        EXPECT_EQ(std::vector<int32_t>(first_target, first_target + micro_tokens), want_targets) << "rank " << rank << " micro-batch " << micro;
        EXPECT_EQ(*first, (step_start + (rank * k + micro) * micro_tokens) % 100);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine
