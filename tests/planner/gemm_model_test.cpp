// The GEMM roofline and the attention-kernel times (gemm_model.h).
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/planner/gemm_model.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

class GemmModel : public ::testing::Test {
 protected:
  const GpuProfile a100 = testing::shipped_gpu("a100-80g");
  const KernelRoofs roofs = kernel_roofs(a100, Precision::bf16, 0.8);
  double achieved_fraction(const GemmShape& g) const { return g.flops() / gemm_seconds(g, roofs) / roofs.peak_flops; }
};

// The A100's measured best shape, 86.9% of the peak (a100-80g.json), for an ordinary shape.
constexpr double kA100Roof = 0.869 * kOrdinaryShapeFractionOfBest;

TEST_F(GemmModel, ALargeAlignedGemmRunsAtTheMeasuredEfficiency) {
  // 16384 x 16384 tiles fill 64 x 128 = 8192 tiles: 75.9 waves of 108, so 76 waves (0.1% idle).
  EXPECT_NEAR(achieved_fraction({16384, 16384, 16384}), kA100Roof, 0.002);
}

TEST_F(GemmModel, EfficiencyRisesWithSizeAndSaturates) {
  double previous = 0;
  for (double m : {256.0, 1024.0, 4096.0, 16384.0, 65536.0}) {
    const double fraction = achieved_fraction({m, 4096, 4096});
    EXPECT_GE(fraction, previous - 0.02) << m;  // a partial last wave may cost a little
    EXPECT_LE(fraction, kA100Roof + 1e-9) << m;
    previous = fraction;
  }
  EXPECT_LT(achieved_fraction({256, 4096, 4096}), 0.3 * kA100Roof) << "32 tiles occupy 32 of 108 SMs";
  EXPECT_GT(previous, 0.99 * kA100Roof);
}

TEST_F(GemmModel, OneTileMoreThanAWaveTakesTwoWaves) {
  // 108 tiles of 256 x 128 fill one wave on the A100's 108 SMs; one tile more needs a second.
  const double one_wave = gemm_seconds({256, 128 * 108, 8192}, roofs);
  const double two_waves = gemm_seconds({256, 128 * 109, 8192}, roofs);
  EXPECT_NEAR(two_waves / one_wave, 2.0, 1e-9);
}

TEST_F(GemmModel, AThinReductionIsBoundByHbm) {
  // Unfused QK^T with head_dim 64: s x s scores written for 2·s·s·64 FLOPs, 16 heads.
  const GemmShape scores{2048, 2048, 64, 16};
  const double bytes = (2048.0 * 64 * 2 + 2048.0 * 2048) * 16 * 2;
  EXPECT_DOUBLE_EQ(gemm_seconds(scores, roofs), bytes / (2039e9 * 0.8));
}

TEST_F(GemmModel, FusedCausalAttentionDoesHalfTheWorkAndBackwardTwoAndAHalfTimes) {
  ModelConfig c;
  c.num_heads = 32;
  c.head_dim = 128;
  const PassSeconds fused = attention_core_seconds(c, true, 2, 4096, 4, roofs);
  const double causal_flops = 4.0 * 2 * 8 * 4096 * (4096 + 1) / 2.0 * 128;  // micro-batch 2, 32/4 heads
  EXPECT_NEAR(fused.forward, causal_flops / (312e12 * 0.50), 1e-12);
  EXPECT_NEAR(fused.backward, 2.5 * fused.forward, 1e-12);
}

// --tp-comm-overlap: Llama 3 70B's two row-parallel projections at tp 4, 4096
// tokens, worked by hand. o_proj is 4096 × 8192 × 2048 on a rank, down_proj
// 4096 × 8192 × 7168: 16 × 64 = 1024 tiles of 256 × 128 each, 8 waves on the
// H100's 132 SMs (7.8) and 9 on the 116 the reduce-scatter's 16 leave (8.8).
// One more wave each, a wave being 2 · 256 · 128 · k FLOPs on one SM.
TEST(UserbufferOverlap, TheRowParallelForwardGemmsRunOnTheSmsTheReduceScatterLeaves) {
  const Model llama = testing::shipped_model("llama-3-70b");
  const KernelRoofs h100 = kernel_roofs(testing::shipped_gpu("h100-80g"), Precision::bf16, 0.8);
  ASSERT_EQ(h100.sm_count, 132);
  const double per_sm = h100.matmul_flops / 132;
  const double one_more_wave_each = 2.0 * 256 * 128 * (2048 + 7168) / per_sm;
  EXPECT_NEAR(userbuffer_sm_margin_seconds(llama, 4096, 4, h100), one_more_wave_each, 1e-12);
}

TEST(CausalKeys, WholeSequenceOrSlidingWindow) {
  EXPECT_DOUBLE_EQ(causal_keys_per_query(4, 0), 2.5);  // (1 + 2 + 3 + 4) / 4
  EXPECT_DOUBLE_EQ(causal_keys_per_query(4, 2), 1.75); // (1 + 2 + 2 + 2) / 4
  EXPECT_DOUBLE_EQ(causal_keys_per_query(4, 8), 2.5);
}

TEST(KernelRoofs, AProfileWithoutMeasurementsTakesTheDefaults) {
  GpuProfile gpu = testing::shipped_gpu("l40s-48g");
  const KernelRoofs r = kernel_roofs(gpu, Precision::bf16, 0.8);
  EXPECT_DOUBLE_EQ(r.matmul_flops, gpu.peak_tflops.bf16 * 1e12 * kDefaultMatmulEfficiency * kOrdinaryShapeFractionOfBest);
  EXPECT_DOUBLE_EQ(r.fused_attention_flops, gpu.peak_tflops.bf16 * 1e12 * kDefaultFusedAttentionEfficiency);
  EXPECT_EQ(r.sm_count, 142);
}

// Every matmul weight gives three GEMMs whose FLOPs are each 2 · tokens · its
// elements on the rank; at tp 2 GPT-2's split weights (the blocks' four) halve
// and the vocabulary's head is a padded half.
TEST(StepGemms, ThreePerWeightWithTheRanksShareOfItsElements) {
  const Model gpt2 = testing::shipped_model("gpt2");
  const int64_t tokens = 4096;
  for (const int64_t tp : {1, 2}) {
    const std::vector<StepGemm> gemms = step_gemms(gpt2, tokens, tp);
    int64_t weights = 0;
    double expected = 0;
    for (const TensorInfo& t : gpt2.inventory.tensors) {
      if (!t.is_matmul_weight) continue;
      ++weights;
      double share = t.tp_split == TpSplit::replicated ? 1.0 : 1.0 / static_cast<double>(tp);
      if (t.tp_split == TpSplit::vocab) share = std::ceil(50257.0 / static_cast<double>(tp)) / 50257.0;  // 25,129 rows a rank at tp 2
      expected += 2.0 * static_cast<double>(tokens) * static_cast<double>(t.numel()) * share;
    }
    ASSERT_EQ(static_cast<int64_t>(gemms.size()), 3 * weights);
    double by_pass[3] = {0, 0, 0};
    for (const StepGemm& g : gemms) by_pass[static_cast<int>(g.pass)] += g.shape.flops();
    for (const double flops : by_pass) EXPECT_NEAR(flops / expected, 1.0, 1e-12) << "tp " << tp;
  }
  // GPT-2's Conv1D weights are stored (in, out), its tied head as (vocab, hidden).
  const std::vector<StepGemm> gemms = step_gemms(gpt2, tokens, 1);
  EXPECT_TRUE(gemms.front().weight_stored_in_out) << gemms.front().weight->name;
  EXPECT_FALSE(gemms.back().weight_stored_in_out) << gemms.back().weight->name;
  EXPECT_EQ(gemms.back().layer_entry, static_cast<size_t>(gpt2.config.num_layers + 1));
  const StepGemm& head_input_gradient = gemms[gemms.size() - 2];
  EXPECT_EQ(head_input_gradient.pass, GemmPass::input_gradient);
  EXPECT_EQ(head_input_gradient.shape.n, 768) << "tokens x hidden, over the vocabulary";
  EXPECT_EQ(gemms.back().shape.n, 50257) << "the head's weight gradient: hidden x vocabulary, over the tokens";
}

}  // namespace
}  // namespace tessera::planner
