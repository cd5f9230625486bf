// Megatron's vocabulary-parallel cross-entropy (vocab_parallel_loss.h): its bytes
// per token worked pass by pass by hand, which runs get it, and where the
// simulator charges it.
#include <gtest/gtest.h>

#include "tessera/planner/cluster.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/vocab_parallel_loss.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;

TEST(VocabParallelLoss, BytesPassByPass) {
  // bf16 logits, unfused. Forward per logit: the cast up 6, max 4, the subtraction 8,
  // exp 8, the sums 4, the division 8 (38). Backward: mul_ 8, the cast back 6 (14).
  const ElementwiseBytes unfused = vocab_parallel_cross_entropy_bytes(64128, 2, false);
  EXPECT_DOUBLE_EQ(unfused.forward, 38 * 64128.0);
  EXPECT_DOUBLE_EQ(unfused.backward, 14 * 64128.0);
  // Fused: logits_max reads 2 and writes the fp32 copy 4, the subtraction-and-exp 8, the
  // division 8 (22); backward the softmax read and written back 8, the bf16 gradient 2 (10).
  const ElementwiseBytes fused = vocab_parallel_cross_entropy_bytes(64128, 2, true);
  EXPECT_DOUBLE_EQ(fused.forward, 22 * 64128.0);
  EXPECT_DOUBLE_EQ(fused.backward, 10 * 64128.0);
  // fp32 logits need no cast: 32 and 8 unfused; fused, max reads 4 and writes nothing (20),
  // and the gradient is still written in bf16 (10).
  EXPECT_DOUBLE_EQ(vocab_parallel_cross_entropy_bytes(51200, 4, false).forward, 32 * 51200.0);
  EXPECT_DOUBLE_EQ(vocab_parallel_cross_entropy_bytes(51200, 4, false).backward, 8 * 51200.0);
  EXPECT_DOUBLE_EQ(vocab_parallel_cross_entropy_bytes(51200, 4, true).forward, 20 * 51200.0);
  EXPECT_DOUBLE_EQ(vocab_parallel_cross_entropy_bytes(51200, 4, true).backward, 10 * 51200.0);
}

TEST(VocabParallelLoss, WhichRunsRunIt) {
  const ModelConfig llama = shipped_model("llama-3-8b").config;
  TrainingOptions flash, megatron;
  megatron.activation_profile = ActivationProfile::megatron;
  EXPECT_TRUE(runs_vocab_parallel_cross_entropy(llama, Runtime::megatron, flash));
  EXPECT_TRUE(runs_vocab_parallel_cross_entropy(llama, Runtime::colossalai, megatron));  // Megatron-LM's own model
  EXPECT_FALSE(runs_vocab_parallel_cross_entropy(llama, Runtime::colossalai, flash));
  EXPECT_FALSE(runs_vocab_parallel_cross_entropy(llama, Runtime::torchtitan, flash));  // its eager loss is in its outside bytes
  TrainingOptions hf;
  hf.activation_profile = ActivationProfile::hf_autocast;
  EXPECT_FALSE(runs_vocab_parallel_cross_entropy(llama, Runtime::colossalai, hf));
}

TEST(VocabParallelLoss, ChargedOnTheLastStageAtHbmSpeed) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 8, 8, 400).value();
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout = ParallelLayout{4, 2, 1, false};
  r.training.seq_len = 2048;
  r.training.num_micro_batches = 4;
  const auto step = [&](Runtime runtime, bool fusion) {
    r.plugin.runtime = runtime;
    r.plugin.cross_entropy_loss_fusion = fusion;
    const MemoryEstimate memory = testing::estimate_or_fail(model, h100, r);
    return simulate_step(model, cluster, r, memory, SimulationSettings{}, false).value().breakdown;
  };
  // ColossalAI's runtime under the flash profile charges no loss; Megatron-Core's the same
  // passes and its loss over 128,256 / 2 logits a token, 4 micro-batches of 2,048 tokens.
  // Its backward also adds each micro-batch's embedding and norm gradients into the fp32
  // main-gradient buffer (10 bytes each: gradient_accumulation.h).
  const StepBreakdown none = step(Runtime::colossalai, false), unfused = step(Runtime::megatron, false), fused = step(Runtime::megatron, true);
  const double logits = 4 * 2048 * 64128.0, hbm = 3350e9 * 0.8;
  const double embedding_and_norms = 64128.0 * 4096 + (2 * 32 + 1) * 4096;
  const double accumulation = 4 * embedding_and_norms * 10 / hbm;
  EXPECT_NEAR(unfused.forward_s - none.forward_s, 38 * logits / hbm, 1e-12);
  EXPECT_NEAR(unfused.backward_s - none.backward_s, 14 * logits / hbm + accumulation, 1e-12);
  EXPECT_NEAR(fused.forward_s - none.forward_s, 22 * logits / hbm, 1e-12);
  EXPECT_NEAR(fused.backward_s - none.backward_s, 10 * logits / hbm + accumulation, 1e-12);
}

}  // namespace
}  // namespace tessera::planner
