// Megatron-LM's block kernel by kernel (megatron_elementwise.h): its bytes per
// token worked kernel by kernel by hand, which runs get them, and where the
// simulator charges them.
#include <gtest/gtest.h>

#include "tessera/planner/activations.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/megatron_elementwise.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;

// A GPT-2 of hidden 64, 4 heads, MLP 256, dropout 0.1 everywhere (GPT2Config's default).
ModelConfig small_gpt() {
  return parse_model_config(R"({"model_type": "gpt2", "vocab_size": 1000, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 4})", "small")
      .value();
}

TEST(MegatronElementwise, CoreFusedSoftmaxUpTo2048KeysTorchsBeyond) {
  // fp16 at tp 2, sequences of 128: per token 2 heads × 128 scores, q and k of 32. The fused
  // causal softmax reads a row's 64.5 unmasked keys on average (129/256 of it) and writes the row.
  const ElementwiseBytes core = megatron_lm_core_bytes(small_gpt(), 2, 2, 128);
  const double unmasked = 129.0 / 256;
  EXPECT_DOUBLE_EQ(core.forward, 256 * (2 * unmasked + 2)  // softmax
                                     + 256 * 5             // dropout: read, written with its one-byte mask
                                     + 4 * 32);            // the context's copy
  EXPECT_DOUBLE_EQ(core.backward, 256 * (4 * unmasked + 2)  // softmax: gradient and probabilities read, written
                                      + 256 * 5             // dropout: gradient and mask read, written
                                      + 4 * (32 + 32));     // dQ and dK scaled by baddbmm's alpha
  // Past 2,048 keys torch's kernels run in fp32: the cast up 6, the scaling 8, masked_fill_ 9,
  // softmax 8, the cast down 6 (37 a score); backward 6, 12, 9, 8, 6 (41).
  const ElementwiseBytes torch_path = megatron_lm_core_bytes(small_gpt(), 2, 2, 4096);
  EXPECT_DOUBLE_EQ(torch_path.forward, 2 * 4096 * (37.0 + 5) + 4 * 32);
  EXPECT_DOUBLE_EQ(torch_path.backward, 2 * 4096 * (41.0 + 5) + 4 * 64);
  // In fp32 no cast: 8 + 9 + 8 forward, 12 + 9 + 8 backward, and dropout's 9 each way.
  const ElementwiseBytes fp32 = megatron_lm_core_bytes(small_gpt(), 4, 2, 128);
  EXPECT_DOUBLE_EQ(fp32.forward, 256 * (25.0 + 9) + 8 * 32);
  EXPECT_DOUBLE_EQ(fp32.backward, 256 * (29.0 + 9) + 8 * 64);
  // ALiBi (BLOOM at tp 4: 28 heads a rank): baddbmm copies the bias out to every score and
  // reads it back, 4 bytes a score in bf16 forward; nothing in backward.
  ModelConfig bloom = shipped_model("bloom-176b").config;
  const ElementwiseBytes alibi = megatron_lm_core_bytes(bloom, 2, 4, 2048);
  bloom.learned_positions = true;
  const ElementwiseBytes table = megatron_lm_core_bytes(bloom, 2, 4, 2048);
  EXPECT_DOUBLE_EQ(alibi.forward - table.forward, 4 * 28 * 2048.0);
  EXPECT_DOUBLE_EQ(alibi.backward, table.backward);
}

TEST(MegatronElementwise, GptBlockKernelByKernel) {
  // fp16 at tp 2, sequences of 128: per token the rank holds the stream's 64, q, k, v of 32
  // each and an MLP of 128. Hidden 64 is not a persistent-LayerNorm size: its backward reads twice.
  const ModelConfig gpt = small_gpt();
  const ElementwiseBytes core = megatron_lm_core_bytes(gpt, 2, 2, 128);
  const ElementwiseBytes bytes = megatron_lm_block_bytes(gpt, 2, 2, false, 128);
  const double forward = 2 * 4 * 64    // the LayerNorms: read, write
                         + 4 * 96      // the q/k/v bias added after the GEMM
                         + 2 * 7 * 64  // bias-dropout-add twice: two reads, the sum and the mask written
                         + 4 * 128;    // bias_gelu: read, write
  const double backward = 2 * 10 * 64   // the LayerNorms: gradient and input read twice, gradient written
                          + 2 * 6 * 64  // the two residual sums
                          + 2 * 96      // the q/k/v bias gradient
                          + 4 * 96      // q, k, v's gradients concatenated
                          + 2 * 7 * 64  // bias-dropout-add: gradient and mask read, gradient written, read for the bias
                          + 8 * 128;    // bias_gelu_back (two reads, a write) and fc1's bias gradient
  EXPECT_DOUBLE_EQ(bytes.forward, core.forward + forward);
  EXPECT_DOUBLE_EQ(bytes.backward, core.backward + backward);

  // Sequence parallelism runs the norms, the bias-dropout-adds and the sums on half the tokens.
  const ElementwiseBytes sp = megatron_lm_block_bytes(gpt, 2, 2, true, 128);
  EXPECT_DOUBLE_EQ(bytes.forward - sp.forward, (2 * 4 + 2 * 7) * 32.0);
  EXPECT_DOUBLE_EQ(bytes.backward - sp.backward, (2 * 10 + 2 * 6 + 2 * 7) * 32.0);

  // Without dropout no masks are written and no dropout runs over the scores.
  ModelConfig no_dropout = gpt;
  no_dropout.attention_dropout = no_dropout.hidden_dropout = 0;
  const ElementwiseBytes plain = megatron_lm_block_bytes(no_dropout, 2, 2, false, 128);
  EXPECT_DOUBLE_EQ(bytes.forward - plain.forward, 256 * 5 + 2 * 64);
  EXPECT_DOUBLE_EQ(bytes.backward - plain.backward, 256 * 5 + 2 * 64);
}

TEST(MegatronElementwise, LlamaBlockHasNoBiasesAndRotatesQueriesAndKeys) {
  // Llama 3 8B in bf16 at tp 1 and 2,048 tokens: q 4,096, k and v 1,024 each, the MLP 14,336;
  // hidden 4,096 runs the persistent LayerNorm kernel.
  const ModelConfig llama = shipped_model("llama-3-8b").config;
  const ElementwiseBytes core = megatron_lm_core_bytes(llama, 2, 1, 2048);
  const ElementwiseBytes bytes = megatron_lm_block_bytes(llama, 2, 1, false, 2048);
  EXPECT_DOUBLE_EQ(bytes.forward - core.forward, 2 * 4 * 4096.0      // the RMSNorms
                                                     + 4 * 5120.0    // RoPE on q and k: read, write
                                                     + 2 * 6 * 4096.0  // the residual adds: two reads, a write
                                                     + 10 * 14336.0);  // SiLU and the product
  EXPECT_DOUBLE_EQ(bytes.backward - core.backward, 2 * 6 * 4096.0 + 2 * 6 * 4096.0 + 4 * 6144.0 + 4 * 5120.0 + 2 * 4 * 4096.0 + 18 * 14336.0);
}

TEST(MegatronElementwise, OutsideTheBlocks) {
  // First stage: two lookups written, their sum (two reads, a write), the [b, s] → [s, b] copy,
  // the dropout (read, write, mask); backward the dropout's and each table's gradient added in.
  // Last stage: the final LayerNorm and the unfused loss over 500 logits, 38 and 14 bytes each.
  const OutsideBlocksBytes outside = megatron_lm_outside_bytes(small_gpt(), 2, 2, false, false);
  EXPECT_DOUBLE_EQ(outside.first_stage.forward, (2 * 2 + 6 + 4 + 5) * 64.0);
  EXPECT_DOUBLE_EQ(outside.first_stage.backward, (2 * 6 + 5) * 64.0);
  EXPECT_DOUBLE_EQ(outside.last_stage.forward, 4 * 64 + 38 * 500.0);
  EXPECT_DOUBLE_EQ(outside.last_stage.backward, 10 * 64 + 14 * 500.0);  // hidden 64: the older LayerNorm kernel
}

TEST(MegatronElementwise, TheMegatronProfileRunsThem) {
  const ModelConfig gpt = small_gpt();
  TrainingOptions megatron;
  megatron.activation_profile = ActivationProfile::megatron;
  EXPECT_EQ(elementwise_execution(gpt, Runtime::colossalai, megatron), ElementwiseExecution::megatron_lm_kernels);
  EXPECT_EQ(elementwise_execution(gpt, Runtime::megatron, megatron), ElementwiseExecution::megatron_lm_kernels);
  EXPECT_EQ(elementwise_execution(gpt, Runtime::megatron, TrainingOptions{}), ElementwiseExecution::fused);  // Megatron-Core's kernels: not read
  megatron.torch_compile = true;
  EXPECT_EQ(elementwise_execution(gpt, Runtime::colossalai, megatron), ElementwiseExecution::fused);
}

TEST(MegatronElementwise, ChargedPerMicroBatchAtHbmSpeed) {
  // GPT-2 medium on 8 A100s at tp 2, 4 micro-batches of 2 × 1,024 tokens, no pipeline and no
  // recompute. torch.compile stands for the fused accounting: each kept tensor written once in
  // forward, read and its gradient written in backward, and no loss.
  const Model model = shipped_model("gpt2-medium");
  const GpuProfile a100 = shipped_gpu("a100-80g");
  const ClusterSpec cluster = make_cluster(a100, 8, 8, 200).value();
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout = ParallelLayout{4, 2, 1, false};
  r.training.activation_profile = ActivationProfile::megatron;
  r.training.precision = Precision::fp16;
  r.training.seq_len = 1024;
  r.training.micro_batch_size = 2;
  r.training.num_micro_batches = 4;
  const auto step = [&](bool compiled) {
    r.training.torch_compile = compiled;
    return simulate_step(model, cluster, r, MemoryEstimate{}, SimulationSettings{}, false).value().breakdown;
  };
  const StepBreakdown kernels = step(false), fused = step(true);
  const ModelConfig& c = model.config;
  const ElementwiseBytes block = megatron_lm_block_bytes(c, 2, 2, false, 1024);
  const OutsideBlocksBytes outside = megatron_lm_outside_bytes(c, 2, 2, false, false);
  const auto stash = static_cast<double>(
      block_activation_bytes(activation_table(c, ActivationProfile::megatron, Precision::fp16), activation_shape(r), RecomputeMode::none).stash);
  const double tokens = 2 * 1024, layers = static_cast<double>(c.num_layers), hbm = 2039e9 * 0.8;
  const double forward = (block.forward * tokens - stash) * layers + (outside.first_stage.forward + outside.last_stage.forward) * tokens;
  const double backward = (block.backward * tokens - 2 * stash) * layers + (outside.first_stage.backward + outside.last_stage.backward) * tokens;
  EXPECT_NEAR(kernels.forward_s - fused.forward_s, 4 * forward / hbm, 1e-9);
  EXPECT_NEAR(kernels.backward_s - fused.backward_s, 4 * backward / hbm, 1e-9);
  EXPECT_GT(forward, 0);  // the kernels move more than the kept tensors

  // Selective recompute runs the core again: its two batched GEMMs and its kernels.
  r.training.torch_compile = false;
  r.training.recompute = RecomputeMode::selective;
  const StepBreakdown selective = simulate_step(model, cluster, r, MemoryEstimate{}, SimulationSettings{}, false).value().breakdown;
  const double core_gemms = attention_core_seconds(c, false, 2, 1024, 2, kernel_roofs(a100, Precision::fp16, 0.8)).forward;
  EXPECT_NEAR(selective.recompute_s, 4 * layers * (core_gemms + megatron_lm_core_bytes(c, 2, 2, 1024).forward * tokens / hbm), 1e-9);
}

}  // namespace
}  // namespace tessera::planner
