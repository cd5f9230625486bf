#include <gtest/gtest.h>

#include "tessera/planner/activations.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

// Korthikanti et al. 2022, Table 2, for their GPT-3 175B (a = 96, h = 12288,
// s = 2048) with t = 8, in bytes per layer for micro-batch b = 1.
class Korthikanti : public ::testing::Test {
 protected:
  const Model model = testing::shipped_model("gpt3-175b");
  const ActivationTable table = activation_table(model.config, ActivationProfile::megatron, Precision::bf16);
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;

  int64_t layer(int64_t tp, bool sp, RecomputeMode mode) const {
    return block_activation_bytes(table, ActivationShape{1, 2048, tp, sp}, mode).stash;
  }
};

TEST_F(Korthikanti, NoParallelism) {
  EXPECT_EQ(layer(1, false, RecomputeMode::none), static_cast<int64_t>(s * b * h * (34 + 5 * a * s / h)));
}

TEST_F(Korthikanti, TensorParallel) {
  EXPECT_EQ(layer(8, false, RecomputeMode::none), static_cast<int64_t>(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))));
}

TEST_F(Korthikanti, TensorAndSequenceParallel) {
  EXPECT_EQ(layer(8, true, RecomputeMode::none), static_cast<int64_t>(s * b * h * (34 / t + 5 * a * s / (h * t))));
}

TEST_F(Korthikanti, TensorParallelWithSelectiveRecompute) {
  EXPECT_EQ(layer(8, false, RecomputeMode::selective), static_cast<int64_t>(s * b * h * (10 + 24 / t)));
}

TEST_F(Korthikanti, TensorAndSequenceParallelWithSelectiveRecompute) {
  EXPECT_EQ(layer(8, true, RecomputeMode::selective), static_cast<int64_t>(s * b * h * 34 / t));
}

TEST_F(Korthikanti, FullRecomputeKeepsTheLayerInput) {
  EXPECT_EQ(layer(8, false, RecomputeMode::full), static_cast<int64_t>(2 * s * b * h));
}

TEST_F(Korthikanti, MegatronProfileCountsNoWorkingSet) {
  const auto bytes = block_activation_bytes(table, ActivationShape{1, 2048, 8, true}, RecomputeMode::full);
  EXPECT_EQ(bytes.working, 0);
}

// The flash profile on the same layer: Korthikanti's terms without the 5as/h
// ones (scores, softmax, its dropout mask and output), plus a fp32
// log-sum-exp per query row and head (4·a·s·b bytes, heads split over t).
class Flash : public Korthikanti {
 protected:
  const ActivationTable flash = activation_table(model.config, ActivationProfile::flash, Precision::bf16);
  int64_t flash_layer(int64_t seq, int64_t tp, bool sp, RecomputeMode mode) const {
    return block_activation_bytes(flash, ActivationShape{1, seq, tp, sp}, mode).stash;
  }
};

TEST_F(Flash, NoParallelismKeepsNoScores) {
  EXPECT_EQ(flash_layer(2048, 1, false, RecomputeMode::none), static_cast<int64_t>(s * b * h * 34 + 4 * a * s * b));
}

TEST_F(Flash, TensorAndSequenceParallel) {
  EXPECT_EQ(flash_layer(2048, 8, false, RecomputeMode::none), static_cast<int64_t>(s * b * h * (10 + 24 / t) + 4 * a / t * s * b));
  EXPECT_EQ(flash_layer(2048, 8, true, RecomputeMode::none), static_cast<int64_t>(s * b * h * 34 / t + 4 * a / t * s * b));
}

TEST_F(Flash, SelectiveRecomputeDropsTheLogSumExpOnly) {
  EXPECT_EQ(flash_layer(2048, 8, false, RecomputeMode::selective), layer(8, false, RecomputeMode::selective));
  EXPECT_EQ(flash_layer(2048, 8, false, RecomputeMode::full), layer(8, false, RecomputeMode::full));
}

TEST_F(Flash, LinearInTheSequence) {
  for (RecomputeMode mode : {RecomputeMode::none, RecomputeMode::selective, RecomputeMode::full}) {
    EXPECT_EQ(flash_layer(16384, 8, true, mode), 2 * flash_layer(8192, 8, true, mode));
  }
  EXPECT_TRUE(flash.backward_scratch.empty());
  EXPECT_FALSE(flash.counts_recompute_working_set);
}

TEST(ActivationProfiles, MegatronFollowsTheFamilysWidths) {
  // Llama-2-70B: no dropout, GQA (K and V of 1024 wide), SwiGLU (gate and up of I each).
  const Model model = testing::shipped_model("llama-2-70b");
  const ActivationTable table = activation_table(model.config, ActivationProfile::megatron, Precision::bf16);
  const int64_t s = 4096, h = 8192, kv = 1024, I = 28672, a = 64;
  const int64_t per_token = 2 * (h + h + (h + kv) + kv + h + h + h + 2 * I + I);  // norms, inputs, QK, V, proj, MLP
  EXPECT_EQ(block_activation_bytes(table, ActivationShape{1, s, 1, false}, RecomputeMode::none).stash, s * per_token + 2 * a * s * s);
}

TEST(ActivationProfiles, ParallelResidualSharesTheNormInput) {
  const Model neox = testing::shipped_model("gpt-neox-20b");
  const ActivationTable table = activation_table(neox.config, ActivationProfile::megatron, Precision::bf16);
  const int64_t s = 2048, h = 6144, a = 64;
  // No dropout, and one norm input for both branches: norm input, QKV input, Q and K, V,
  // projection input, MLP input, GELU input and output (I = 4h).
  const int64_t per_token = 2 * (h + h + 2 * h + h + h + h + 4 * h + 4 * h);
  EXPECT_EQ(block_activation_bytes(table, ActivationShape{1, s, 1, false}, RecomputeMode::none).stash, s * per_token + 2 * a * s * s);
}

TEST(ActivationProfiles, TesseraRecomputeWorkingSetIsOneLayer) {
  const Model model = testing::shipped_model("gpt2");
  const ActivationTable table = activation_table(model.config, ActivationProfile::tessera, Precision::fp32);
  const ActivationShape shape{4, 1024, 1, false};
  const auto none = block_activation_bytes(table, shape, RecomputeMode::none);
  const auto selective = block_activation_bytes(table, shape, RecomputeMode::selective);
  const auto full = block_activation_bytes(table, shape, RecomputeMode::full);
  const int64_t lse = 4 * 12 * 1024 * 4;  // b·a·s fp32 log-sum-exps: the engine keeps no s² term
  EXPECT_EQ(none.working, 0);
  EXPECT_EQ(selective.stash + selective.working, none.stash);
  EXPECT_EQ(selective.working, lse);
  EXPECT_EQ(full.stash, 4 * 1024 * 768 * 4);  // the block input
  EXPECT_EQ(full.stash + full.working, none.stash);
}

}  // namespace
}  // namespace tessera::planner
