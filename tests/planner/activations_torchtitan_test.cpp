// torchtitan's eager Llama block (activations_torchtitan.h): what each PyTorch
// op saves, by hand for Llama 3 8B (h 4,096; q 4,096; k and v 1,024; MLP 14,336;
// 32 heads), and the ops it shares with Hugging Face's Llama layer held to the
// terms our H100 probe measured for those (activations_hf.cpp).
#include <gtest/gtest.h>

#include <string_view>

#include "tessera/planner/activations.h"
#include "tessera/planner/memory_model.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_model;

ActivationTable eager(const ModelConfig& c, BlockAccounting block = BlockAccounting::torchtitan_eager) {
  return activation_table(c, ActivationProfile::flash, Precision::bf16, kMeasuredTransformers, block);
}

constexpr ActivationShape kOneToken{1, 1};

TEST(TorchtitanEagerBlock, Llama3_8bPerTokenByHand) {
  const ActivationTable table = eager(shipped_model("llama-3-8b").config);
  // Each RMSNorm: its fp32 input 16,384 + rstd 4 + the normalised 8,192 + the weighted output 8,192 = 32,772 B.
  // Attention: SDPA's q, and k and v copied out to 32 heads, 3 · 8,192; its log-sum-exp 32 · 4; wo's input 8,192.
  // SwiGLU: w1's output, SiLU's, w3's and the product, 4 · 28,672.
  const int64_t none = 2 * 32772 + 3 * 8192 + 128 + 8192 + 4 * 28672;
  EXPECT_EQ(block_activation_bytes(table, kOneToken, RecomputeMode::none).stash, none);
  EXPECT_EQ(block_activation_bytes(table, kOneToken, RecomputeMode::none).working, 0);
  // torchtitan's op policy: the block's input as it came (bf16), wq's and wv's outputs
  // (8,192 and 2,048, which no eager op keeps), SDPA's output and log-sum-exp, w1's and w2's outputs.
  const BlockActivationBytes op = block_activation_bytes(table, kOneToken, RecomputeMode::op_selective);
  EXPECT_EQ(op.stash, 8192 + 8192 + 2048 + 8192 + 128 + 28672 + 8192);
  // Backward holds the rest of the block again: all the eager ops keep, but SDPA's output and the two it shares.
  EXPECT_EQ(op.working, none - 8192 - 128 - 28672);
  // Full recompute: the input in bf16, and the whole block again in its backward.
  const BlockActivationBytes full = block_activation_bytes(table, kOneToken, RecomputeMode::full);
  EXPECT_EQ(full.stash, 8192);
  EXPECT_EQ(full.working, none);
}

TEST(TorchtitanEagerBlock, TritonRmsNormKeepsItsInputAndRstd) {
  const ModelConfig c = shipped_model("llama-3-8b").config;
  const ActivationTable python = eager(c), triton = eager(c, BlockAccounting::torchtitan_eager_fused_rmsnorm);
  // Per norm the 16-bit input (8,192) and rstd in place of the fp32 copy, rstd and the normalised tensor.
  EXPECT_EQ(block_activation_bytes(python, kOneToken, RecomputeMode::none).stash - block_activation_bytes(triton, kOneToken, RecomputeMode::none).stash,
            2 * (16384 + 8192 - 8192));
  // The checkpointed input is the same 16-bit tensor either way.
  EXPECT_EQ(block_activation_bytes(triton, kOneToken, RecomputeMode::op_selective).stash,
            block_activation_bytes(python, kOneToken, RecomputeMode::op_selective).stash);
}

TEST(TorchtitanEagerBlock, WithoutGroupedQueryAttentionVIsWvsOutput) {
  // Llama 2 13B, 40 heads of 128 for q, k and v alike: repeat_kv returns v itself, which SDPA keeps.
  const ActivationTable table = eager(shipped_model("llama-2-13b").config);
  const int64_t h = 5120, I = 13824;
  const int64_t norm = 4 * h + 4 + 2 * h + 2 * h;
  EXPECT_EQ(block_activation_bytes(table, kOneToken, RecomputeMode::none).stash, 2 * norm + 3 * 2 * h + 40 * 4 + 2 * h + 4 * 2 * I);
  // The op policy keeps wv's output, the same tensor.
  EXPECT_EQ(block_activation_bytes(table, kOneToken, RecomputeMode::op_selective).stash, 2 * h + 2 * h + 2 * h + 2 * h + 40 * 4 + 2 * I + 2 * h);
}

// LlamaRMSNorm and LlamaMLP run the same ops as torchtitan's RMSNorm and
// FeedForward; their measured terms and these are the same bytes.
TEST(TorchtitanEagerBlock, SharedOpsMatchTheMeasuredHuggingFaceLayer) {
  const ModelConfig c = shipped_model("llama-3-8b").config;
  const ActivationTable titan = eager(c), hf = activation_table(c, ActivationProfile::hf, Precision::bf16);
  const auto bytes = [](const ActivationTable& t, std::string_view name) {
    for (const ActivationTerm& term : t.block) {
      if (term.name == name) return term_bytes(term, kOneToken);
    }
    ADD_FAILURE() << "no term " << name;
    return int64_t{0};
  };
  EXPECT_EQ(bytes(titan, "attn_norm_fp32_input"), bytes(hf, "input_norm_fp32_input"));
  EXPECT_EQ(bytes(titan, "attn_norm_rstd"), bytes(hf, "input_norm_rstd"));
  EXPECT_EQ(bytes(titan, "attn_norm_normalized"), bytes(hf, "input_norm_normalized"));
  EXPECT_EQ(bytes(titan, "mlp_norm_fp32_input"), bytes(hf, "post_norm_fp32_input"));
  EXPECT_EQ(bytes(titan, "mlp_gate") + bytes(titan, "silu_output") + bytes(titan, "mlp_up") + bytes(titan, "activation_output"),
            bytes(hf, "gate_silu_up_product"));
}

// The request picks the eager block only where torchtitan runs its Llama block op by op.
TEST(TorchtitanEagerBlock, OnlyTorchtitansEagerLlamaBlock) {
  const ModelConfig llama = shipped_model("llama-3-8b").config;
  PluginOptions titan;
  titan.runtime = Runtime::torchtitan;
  TrainingOptions t;
  EXPECT_EQ(block_accounting(llama, titan, t), BlockAccounting::torchtitan_eager);
  titan.fused_rmsnorm = true;
  EXPECT_EQ(block_accounting(llama, titan, t), BlockAccounting::torchtitan_eager_fused_rmsnorm);
  t.torch_compile = true;
  EXPECT_EQ(block_accounting(llama, titan, t), BlockAccounting::profile);
  t.torch_compile = false;
  t.activation_profile = ActivationProfile::megatron;
  EXPECT_EQ(block_accounting(llama, titan, t), BlockAccounting::profile);
  EXPECT_EQ(block_accounting(llama, PluginOptions{}, TrainingOptions{}), BlockAccounting::profile);  // ColossalAI's runtime
  EXPECT_EQ(block_accounting(shipped_model("gpt2").config, titan, TrainingOptions{}), BlockAccounting::profile);
}

}  // namespace
}  // namespace tessera::planner
