#include <gtest/gtest.h>

#include "tessera/planner/flops.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

// Narayanan et al. 2021 §5.1: a GPT model costs 72·B·s·l·h²·(1 + s/6h + V/12lh)
// FLOPs per iteration for forward and backward, i.e. per token divide by B·s.
double narayanan_per_token(double l, double h, double s, double V) { return 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)); }

TEST(Flops, MatchesNarayananForGpt3) {
  const Model model = testing::shipped_model("gpt3-175b");
  const double l = 96, h = 12288, s = 2048, V = 50257;
  const FlopsPerToken none = flops_per_token(model, 2048, RecomputeMode::none);
  EXPECT_NEAR(none.forward + none.backward, narayanan_per_token(l, h, s, V), 1.0);
  const FlopsPerToken full = flops_per_token(model, 2048, RecomputeMode::full);
  // Full recompute repeats the blocks' forward, not the head's (the paper repeats the head too: V/16lh).
  EXPECT_NEAR(full.total(), 96 * l * h * h * (1 + s / (6 * h)) + 6 * V * h, 1.0);
}

TEST(Flops, BackwardIsTwiceForwardAndSelectiveRecomputesAttentionOnly) {
  const Model model = testing::shipped_model("llama-2-7b");
  const FlopsPerToken f = flops_per_token(model, 4096, RecomputeMode::selective);
  EXPECT_DOUBLE_EQ(f.backward, 2 * f.forward);
  EXPECT_DOUBLE_EQ(f.recompute, 32.0 * 4 * 4096 * 4096);  // L · 4·s·h
}

TEST(Flops, BlockFlopsCountGroupedQueryWidths) {
  const Model model = testing::shipped_model("llama-2-70b");
  // q and o: 2·h², k and v: 2·h·kv_width, MLP 3·h·I, attention 4·s·h.
  const double h = 8192, kv = 1024, I = 28672, s = 4096;
  EXPECT_DOUBLE_EQ(block_forward_flops_per_token(model, 5, 4096), 2 * (2 * h * h + 2 * h * kv + 3 * h * I) + 4 * s * h);
}

}  // namespace
}  // namespace tessera::planner
