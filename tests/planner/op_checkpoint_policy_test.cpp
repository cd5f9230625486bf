// torchtitan's op-level selective checkpointing (--recompute op_selective,
// op_checkpoint_policy.h): which linears it saves and runs again, what a block
// keeps, the FLOPs and seconds backward adds, and the refusals, worked by hand
// for Llama 3 8B (h 4096, 32 heads, 8 KV heads of 128, SwiGLU 14336, no
// biases) and Qwen2 7B (h 3584, 28 heads, 4 KV heads of 128, SwiGLU 18944,
// biased q/k/v projections).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/flops.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;
using testing::torchtitan_fsdp;

std::vector<std::string> names(const ModelConfig& c, bool OpPolicyLinear::*flag) {
  std::vector<std::string> out;
  for (const OpPolicyLinear& linear : op_policy_linears(c)) {
    if (linear.*flag) out.emplace_back(linear.name);
  }
  return out;
}

TEST(OpCheckpointPolicy, LlamaSavesEveryOtherMatmul) {
  const ModelConfig c = shipped_model("llama-3-8b").config;
  ASSERT_TRUE(is_torchtitan_llama_block(c));
  // Seven mm in forward order: wq, wk, wv, wo, w1, w3, w2; the 1st, 3rd, 5th and 7th are saved.
  EXPECT_EQ(names(c, &OpPolicyLinear::saved), (std::vector<std::string>{"wq", "wv", "w1", "w2"}));
  EXPECT_EQ(names(c, &OpPolicyLinear::recomputed), (std::vector<std::string>{"wk", "wo", "w3"}));
}

TEST(OpCheckpointPolicy, BiasedProjectionsAreAddmmAndNeitherSavedNorCounted) {
  const ModelConfig c = shipped_model("qwen2-7b").config;
  ASSERT_TRUE(c.qkv_bias);
  // wq, wk, wv are addmm; the mm are wo (1st, saved), w1 (2nd), w3 (3rd, saved), w2 (4th:
  // neither saved nor, being last, run again).
  EXPECT_EQ(names(c, &OpPolicyLinear::saved), (std::vector<std::string>{"wo", "w3"}));
  EXPECT_EQ(names(c, &OpPolicyLinear::recomputed), (std::vector<std::string>{"wq", "wk", "wv", "w1"}));
}

TEST(OpCheckpointPolicy, ABlockKeepsItsInputTheSavedOutputsAndSdpa) {
  const ActivationShape shape{1, 8192, 1, false};
  // Llama 3 8B, bf16, per token: input 4096, q 4096, v 1024, SDPA's output 4096, w1 14336 and
  // w2 4096 elements of 2 bytes, and the fp32 log-sum-exp of 32 heads: 127,232 + 128 bytes.
  const ActivationTable llama = activation_table(shipped_model("llama-3-8b").config, ActivationProfile::flash, Precision::bf16);
  EXPECT_EQ(block_activation_bytes(llama, shape, RecomputeMode::op_selective).stash, 8192 * (2 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 32 * 4));
  // Qwen2 7B: input 3584, SDPA's output 3584, wo's output 3584, w3 18944, and 28 heads' log-sum-exp.
  const ActivationTable qwen = activation_table(shipped_model("qwen2-7b").config, ActivationProfile::flash, Precision::bf16);
  EXPECT_EQ(block_activation_bytes(qwen, shape, RecomputeMode::op_selective).stash, 8192 * (2 * (3584 + 3584 + 3584 + 18944) + 28 * 4));
  // wo's and w2's outputs are kept by no other mode: without recompute the block keeps
  // Korthikanti's terms, and selective recompute drops only the log-sum-exp from them.
  const int64_t none = block_activation_bytes(llama, shape, RecomputeMode::none).stash;
  EXPECT_EQ(none - block_activation_bytes(llama, shape, RecomputeMode::selective).stash, 8192 * 32 * 4);
  // What backward writes again: every term kept without recompute but the kept ones
  // (norm outputs, k, the residual, SwiGLU's up and product), not w2's output.
  EXPECT_EQ(recomputed_block_bytes(llama, shape, RecomputeMode::op_selective),
            none - (block_activation_bytes(llama, shape, RecomputeMode::op_selective).stash - 8192 * 2 * 4096));
}

TEST(OpCheckpointPolicy, BackwardRunsTheUnsavedLinearsAgain) {
  const Model model = shipped_model("llama-3-8b");
  // wk (4096 → 1024), wo (4096 → 4096), w3 (4096 → 14336): 2 FLOPs per weight and token.
  const double per_block = 2.0 * 4096 * (1024 + 4096 + 14336);
  EXPECT_DOUBLE_EQ(op_policy_recompute_flops_per_token(model.config), per_block);
  EXPECT_DOUBLE_EQ(flops_per_token(model, 8192, RecomputeMode::op_selective).recompute, 32 * per_block);
}

TEST(OpCheckpointPolicy, ItsRecomputeCostsLessThanFullAndMoreThanNone) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 8, 8, 400).value();
  const auto recompute_s = [&](RecomputeMode mode) {
    const EstimateRequest r = torchtitan_fsdp(8192, mode);
    const MemoryEstimate memory = testing::estimate_or_fail(model, h100, r);
    return simulate_step(model, cluster, r, memory, SimulationSettings{}, false).value().breakdown.recompute_s;
  };
  const double none = recompute_s(RecomputeMode::none), op = recompute_s(RecomputeMode::op_selective), full = recompute_s(RecomputeMode::full);
  EXPECT_EQ(none, 0.0);
  EXPECT_GT(op, 0.0);
  // Full recompute runs every linear and the attention core again; the policy runs 3 of the
  // 7 linears, about 40% of the block's GEMM FLOPs, and never the attention.
  EXPECT_LT(op, 0.5 * full);
}

TEST(OpCheckpointPolicy, OnlyTorchtitansLlamaBlockWithSdpaRunsIt) {
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const Model llama = shipped_model("llama-3-8b");
  const auto refusal = [&](const Model& model, const EstimateRequest& r) {
    const Status s = validate_request(model, h100, r);
    return s ? std::string() : s.error().message;
  };
  EXPECT_EQ(refusal(llama, torchtitan_fsdp(4096, RecomputeMode::op_selective)), "");
  EXPECT_NE(refusal(llama, torchtitan_fsdp(4096, RecomputeMode::selective)).find("is not one of torchtitan's checkpointing modes"), std::string::npos);
  EstimateRequest colossalai = torchtitan_fsdp(4096, RecomputeMode::op_selective);
  colossalai.plugin.runtime = Runtime::colossalai;
  EXPECT_NE(refusal(llama, colossalai).find("use it with --runtime torchtitan --plugin torch_fsdp"), std::string::npos);
  EstimateRequest megatron_profile = torchtitan_fsdp(4096, RecomputeMode::op_selective);
  megatron_profile.training.activation_profile = ActivationProfile::megatron;
  EXPECT_NE(refusal(llama, megatron_profile).find("use --activation-profile flash (got megatron)"), std::string::npos);
  EXPECT_NE(refusal(shipped_model("gpt2"), torchtitan_fsdp(1024, RecomputeMode::op_selective)).find("which gpt2 is not"), std::string::npos);
}

}  // namespace
}  // namespace tessera::planner
