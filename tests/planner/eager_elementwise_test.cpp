// Models run eagerly (eager_elementwise.h): torchtitan's Llama block and
// Hugging Face's GPT-2, their element-wise bytes per token worked op by op by
// hand, which runs get them, and where the simulator charges them.
#include <gtest/gtest.h>

#include "tessera/planner/activations.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using testing::shipped_gpu;
using testing::shipped_model;

TEST(EagerElementwise, LlamaBlockBytesOpByOp) {
  // bf16. Per hidden element: each RMSNorm 36 bytes forward (cast up 6, pow 8, mean 4,
  // x·rsqrt 8, cast down 6, ·weight 4) and 64 backward, the two residual adds 12 each way.
  // Per q and k element: RoPE 20 each way. GQA: keys and values copied out to the query
  // heads, 2·(kv + q) elements of 2 bytes each way. SwiGLU: 10 bytes per element forward,
  // 18 backward. Backward also sums the input gradients of wq, wk, wv (two adds) and of
  // w1, w3 (one), 6 bytes each per hidden element. Llama 3 8B: h = q = 4096, kv = 1024,
  // I = 14336, 8 KV heads of 32.
  const ElementwiseBytes llama3 = torchtitan_eager_block_bytes(shipped_model("llama-3-8b").config, 2);
  EXPECT_DOUBLE_EQ(llama3.forward, (2 * 36 + 12) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 10 * 14336.0);
  EXPECT_DOUBLE_EQ(llama3.backward, (2 * 64 + 12 + 18) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 18 * 14336.0);
  // Llama 2 13B has as many KV heads as query heads: no copies.
  const ElementwiseBytes llama2 = torchtitan_eager_block_bytes(shipped_model("llama-2-13b").config, 2);
  EXPECT_DOUBLE_EQ(llama2.forward, 84 * 5120.0 + 20 * 10240.0 + 10 * 13824.0);
  // fp32: the casts are free (norm 28 forward, 60 backward; RoPE 8), the rest at 4 bytes.
  const ElementwiseBytes fp32 = torchtitan_eager_block_bytes(shipped_model("llama-2-13b").config, 4);
  EXPECT_DOUBLE_EQ(fp32.forward, (2 * 28 + 24) * 5120.0 + 8 * 10240.0 + 20 * 13824.0);
  EXPECT_DOUBLE_EQ(fp32.backward, (2 * 60 + 24 + 36) * 5120.0 + 8 * 10240.0 + 36 * 13824.0);
  // torchtitan's Triton RMSNorm (--fused-rmsnorm): 4 bytes forward (x read, y written), 6 backward.
  const ElementwiseBytes triton = torchtitan_eager_block_bytes(shipped_model("llama-3-8b").config, 2, true);
  EXPECT_DOUBLE_EQ(triton.forward, (2 * 4 + 12) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 10 * 14336.0);
  EXPECT_DOUBLE_EQ(triton.backward, (2 * 6 + 12 + 18) * 4096.0 + (20 + 4) * (4096.0 + 1024) + 18 * 14336.0);
}

// FSDP2 copies each gathered parameter out of the all-gather's buffer on the
// compute stream, a 2-byte read and write per element in forward and again in
// backward (simulate.cpp, add_fsdp2_copy_out); FSDP1 gathers into its flat
// parameter. Both compiled, the rest of the passes is the same.
// Llama 3 8B under FSDP over 8 H100s at 8,192 tokens, simulated under `runtime`.
StepBreakdown llama3_fsdp_step(Runtime runtime, bool compiled) {
  const Model model = shipped_model("llama-3-8b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 8, 8, 400).value();
  EstimateRequest r;
  r.plugin.kind = PluginKind::torch_fsdp;
  r.plugin.runtime = runtime;
  r.layout.dp = 8;
  r.training.seq_len = 8192;
  r.training.torch_compile = compiled;
  return simulate_step(model, cluster, r, testing::estimate_or_fail(model, h100, r), SimulationSettings{}, false).value().breakdown;
}

TEST(EagerElementwise, Fsdp2CopiesEachGatheredParameterOut) {
  const StepBreakdown fsdp2 = llama3_fsdp_step(Runtime::torchtitan, true), fsdp1 = llama3_fsdp_step(Runtime::colossalai, true);
  const double copy = 2.0 * 2.0 * static_cast<double>(shipped_model("llama-3-8b").parameter_count) /
                      (shipped_gpu("h100-80g").hbm_gbps * 1e9 * SimulationSettings{}.memory_efficiency);
  EXPECT_NEAR(fsdp2.forward_s - fsdp1.forward_s, copy, 1e-9);
  EXPECT_NEAR(fsdp2.backward_s - fsdp1.backward_s, copy, 1e-9);
}

TEST(EagerElementwise, OnlyTorchtitansRuntimeRunsItsBlockEagerly) {
  const auto forward_s = [](Runtime runtime) { return llama3_fsdp_step(runtime, false).forward_s; };
  // The same GEMMs and attention; eagerly, 610,304 bytes per token and block go through
  // HBM where a fusing runtime writes what the block keeps (139,264 + 128 bytes).
  EXPECT_GT(forward_s(Runtime::torchtitan), forward_s(Runtime::colossalai));
}

TEST(EagerElementwise, HuggingFaceGpt2BlockBytesOpByOp) {
  const ModelConfig gpt2 = shipped_model("gpt2").config;  // h 768, MLP 3072
  // Under autocast (hf_autocast, bf16): the stream, the norms and the GELU chain fp32, GEMM
  // inputs bf16. Per hidden element forward: two LayerNorms 8 each, two casts for c_attn and
  // c_fc 6 each, two residual adds 10 each (48); backward: at each add the branch's gradient
  // cast 6 and the two gradients summed 12, two LayerNorm backwards 20 each, two casts back
  // 6 each, two bias gradients 2 each (92). Per q/k/v element backward: the three gradients
  // concatenated 4, c_attn's bias gradient 2. SDPA's copies of two of q, k, v: 4 per element
  // of each (a read and a write) forward. Per MLP element, forward: the cast for pow 6,
  // pow, two scalar products, tanh and 1 + 8 each, the add and the product 10 each, 0.5·x 4,
  // the cast for c_proj 6 (76); backward 120 (eager_elementwise.cpp, op by op).
  const ElementwiseBytes autocast = hf_gpt2_eager_block_bytes(gpt2, ActivationProfile::hf_autocast, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(autocast.forward, 48 * 768.0 + 4 * 1536.0 + 76 * 3072.0);
  EXPECT_DOUBLE_EQ(autocast.backward, 92 * 768.0 + 6 * 2304.0 + 120 * 3072.0);
  // 16-bit weights (hf): every op in bf16, no casts: 20 and 36 forward, 36, 6 and 58 backward.
  const ElementwiseBytes bf16 = hf_gpt2_eager_block_bytes(gpt2, ActivationProfile::hf, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(bf16.forward, 20 * 768.0 + 4 * 1536.0 + 36 * 3072.0);
  EXPECT_DOUBLE_EQ(bf16.backward, 36 * 768.0 + 6 * 2304.0 + 58 * 3072.0);
  // Eager attention copies q, kᵀ, v and its output: four h-wide tensors.
  EXPECT_DOUBLE_EQ(hf_gpt2_eager_block_bytes(gpt2, ActivationProfile::hf_eager, Precision::bf16, 1).forward, 20 * 768.0 + 4 * 3072.0 + 36 * 3072.0);
  // tp 2 splits q/k/v and the MLP, not the hidden state.
  const ElementwiseBytes split = hf_gpt2_eager_block_bytes(gpt2, ActivationProfile::hf, Precision::bf16, 2);
  EXPECT_DOUBLE_EQ(split.forward, 20 * 768.0 + 4 * 768.0 + 36 * 1536.0);
  EXPECT_DOUBLE_EQ(split.backward, 36 * 768.0 + 6 * 1152.0 + 58 * 1536.0);
}

TEST(EagerElementwise, HuggingFaceLlamaBlockBytesOpByOp) {
  ModelConfig llama = shipped_model("llama-3-8b").config;  // h = q = 4096, kv = 1024, I = 14336
  // 16-bit weights (hf): the norms and residual adds as torchtitan's (84 per hidden element
  // forward, 158 backward with the q/k/v and gate/up gradient sums); RoPE with rotate_half,
  // per element of q and k: q·cos 4, the negated half 2, the concatenation 4, ·sin 4, the sum
  // 6 (20), backward 16; SDPA takes k and v as they are; SwiGLU 10 and 18.
  const ElementwiseBytes bf16 = hf_llama_eager_block_bytes(llama, ActivationProfile::hf, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(bf16.forward, 84 * 4096.0 + 20 * 5120.0 + 10 * 14336.0);
  EXPECT_DOUBLE_EQ(bf16.backward, 158 * 4096.0 + 16 * 5120.0 + 18 * 14336.0);
  // Under autocast the stream is fp32: each norm 28 forward and 60 backward, five casts of
  // its outputs 6 each way, the residual adds 10 each forward; backward the gradient sums
  // 12 each (three) and the branches' casts back 6 (106 and 222). RoPE in fp32 after the
  // bf16 projections: 36 forward, 42 backward.
  const ElementwiseBytes autocast = hf_llama_eager_block_bytes(llama, ActivationProfile::hf_autocast, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(autocast.forward, 106 * 4096.0 + 36 * 5120.0 + 10 * 14336.0);
  EXPECT_DOUBLE_EQ(autocast.backward, 222 * 4096.0 + 42 * 5120.0 + 18 * 14336.0);
  // Eager attention copies: k and v widened to every head (2·2·5120), q, kᵀ, v for the
  // matmuls (3·4·4096) and the output (4·4096); backward the widening's sums (4·5120).
  const ElementwiseBytes eager = hf_llama_eager_block_bytes(llama, ActivationProfile::hf_eager, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(eager.forward - bf16.forward, 4 * 5120.0 + 12 * 4096.0 + 4 * 4096.0);
  EXPECT_DOUBLE_EQ(eager.backward - bf16.backward, 4 * 5120.0);
  // Qwen2's q, k, v biases: their gradients read the projections' outputs (2 bytes each).
  llama.qkv_bias = true;
  EXPECT_DOUBLE_EQ(hf_llama_eager_block_bytes(llama, ActivationProfile::hf, Precision::bf16, 1).backward - bf16.backward, 2 * (4096.0 + 2 * 1024));
}

TEST(EagerElementwise, EagerAttentionOverTheScores) {
  // GPT-2 at 1,024 tokens: 12 heads × 1,024 scores a token. Forward per score (bf16): the
  // division 4, torch.where 5 (the mask's byte), softmax 4, dropout 5 with its mask (18);
  // backward dropout's 5, softmax's 6, where's 5, the division's 4 (20).
  const ElementwiseBytes gpt2 = hf_eager_attention_score_bytes(shipped_model("gpt2").config, Precision::bf16, 1, 1024);
  EXPECT_DOUBLE_EQ(gpt2.forward, 18 * 12 * 1024.0);
  EXPECT_DOUBLE_EQ(gpt2.backward, 20 * 12 * 1024.0);
  // Llama 3 8B at tp 2 and 8,192 tokens, no dropout: 16 heads a rank. Forward: the scaling 4, the
  // mask added 6, bf16 cast up for softmax 6, softmax in fp32 8, the cast back 6 (30); backward
  // the cast's 6, softmax's 12 and its cast 6, the scaling's 4 (28).
  const ElementwiseBytes llama = hf_eager_attention_score_bytes(shipped_model("llama-3-8b").config, Precision::bf16, 2, 8192);
  EXPECT_DOUBLE_EQ(llama.forward, 30 * 16 * 8192.0);
  EXPECT_DOUBLE_EQ(llama.backward, 28 * 16 * 8192.0);
  // fp16 scores go into softmax as they are (2 read, 4 written) and its backward writes fp16:
  // forward 4 + 6 + 6 + 6 (22), backward 6 + 10 + 4 (20).
  const ElementwiseBytes half = hf_eager_attention_score_bytes(shipped_model("llama-3-8b").config, Precision::fp16, 2, 8192);
  EXPECT_DOUBLE_EQ(half.forward, 22 * 16 * 8192.0);
  EXPECT_DOUBLE_EQ(half.backward, 20 * 16 * 8192.0);
}

TEST(EagerElementwise, EagerAttentionChargesTheScores) {
  // GPT-2 on one H100, micro-batch 4: hf_eager's backward against hf's (SDPA, 16-bit weights)
  // differs by eager attention's copies, its element-wise work over the scores and its
  // unfused GEMMs in place of the fused kernel, in each of the 12 blocks, and by the loss.
  const Model model = shipped_model("gpt2");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 1, 1, 400).value();
  EstimateRequest r;
  r.training.micro_batch_size = 4;
  const auto backward = [&](ActivationProfile profile) {
    r.training.activation_profile = profile;
    return simulate_step(model, cluster, r, MemoryEstimate{}, SimulationSettings{}, false).value().breakdown.backward_s;
  };
  const ModelConfig& c = model.config;
  const Precision p = r.training.precision;
  const int64_t seq = r.training.seq_len;
  const double tokens = 4.0 * static_cast<double>(seq), hbm = 3350e9 * 0.8;
  const double scores = hf_eager_attention_score_bytes(c, p, 1, seq).backward;
  const double blocks = hf_gpt2_eager_block_bytes(c, ActivationProfile::hf_eager, p, 1).backward - hf_gpt2_eager_block_bytes(c, ActivationProfile::hf, p, 1).backward;
  const double loss =
      hf_gpt2_eager_outside_bytes(c, ActivationProfile::hf_eager, p, 1).last_stage.backward - hf_gpt2_eager_outside_bytes(c, ActivationProfile::hf, p, 1).last_stage.backward;
  const KernelRoofs roofs = kernel_roofs(h100, p, 0.8);
  const double cores = attention_core_seconds(c, false, 4, seq, 1, roofs).backward - attention_core_seconds(c, true, 4, seq, 1, roofs).backward;
  EXPECT_NEAR(backward(ActivationProfile::hf_eager) - backward(ActivationProfile::hf), 12 * ((scores + blocks) * tokens / hbm + cores) + loss * tokens / hbm, 1e-9);
  EXPECT_GT(scores, 0);
}

TEST(EagerElementwise, OutsideTheBlocksTheEmbeddingAndTheUpcastLoss) {
  // The loss over 50,257 bf16 logits: the cast 6 and log_softmax 8 per logit forward;
  // nll's gradient 4, log_softmax's backward 12 and the cast's 6 backward.
  const ElementwiseBytes loss = upcast_cross_entropy_bytes(50257, 2);
  EXPECT_DOUBLE_EQ(loss.forward, 14 * 50257.0);
  EXPECT_DOUBLE_EQ(loss.backward, 22 * 50257.0);
  EXPECT_DOUBLE_EQ(upcast_cross_entropy_bytes(50257, 4).forward, 8 * 50257.0);  // fp32 logits: no cast
  // GPT-2 under autocast: two fp32 lookups (4 each, 12 back) and their sum (12) per hidden
  // element; ln_f 8 and its cast 6 forward, 20 and 6 backward, before the loss.
  const OutsideBlocksBytes gpt2 = hf_gpt2_eager_outside_bytes(shipped_model("gpt2").config, ActivationProfile::hf_autocast, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(gpt2.first_stage.forward, 20 * 768.0);
  EXPECT_DOUBLE_EQ(gpt2.first_stage.backward, 24 * 768.0);
  EXPECT_DOUBLE_EQ(gpt2.last_stage.forward, 14 * 768.0 + loss.forward);
  EXPECT_DOUBLE_EQ(gpt2.last_stage.backward, 26 * 768.0 + loss.backward);
  // torchtitan's Llama 3 8B: the bf16 lookup (2, 6 back), the final RMSNorm (36, 64) and the loss over 128,256 logits.
  const OutsideBlocksBytes llama = torchtitan_eager_outside_bytes(shipped_model("llama-3-8b").config, 2);
  EXPECT_DOUBLE_EQ(llama.first_stage.forward, 2 * 4096.0);
  EXPECT_DOUBLE_EQ(llama.first_stage.backward, 6 * 4096.0);
  EXPECT_DOUBLE_EQ(llama.last_stage.forward, 36 * 4096.0 + 14 * 128256.0);
  EXPECT_DOUBLE_EQ(llama.last_stage.backward, 64 * 4096.0 + 22 * 128256.0);
  // Hugging Face's Llama under autocast: the fp32 lookup (4, 12 back), the fp32 final norm
  // (28, 60) and lm_head's input cast (6 each way).
  const OutsideBlocksBytes hf = hf_llama_eager_outside_bytes(shipped_model("llama-3-8b").config, ActivationProfile::hf_autocast, Precision::bf16, 1);
  EXPECT_DOUBLE_EQ(hf.first_stage.forward, 4 * 4096.0);
  EXPECT_DOUBLE_EQ(hf.first_stage.backward, 12 * 4096.0);
  EXPECT_DOUBLE_EQ(hf.last_stage.forward, 34 * 4096.0 + 14 * 128256.0);
  EXPECT_DOUBLE_EQ(hf.last_stage.backward, 66 * 4096.0 + 22 * 128256.0);
}

TEST(EagerElementwise, WhichRunsExecuteOpByOp) {
  const ModelConfig gpt2 = shipped_model("gpt2").config, llama = shipped_model("llama-3-8b").config;
  TrainingOptions hf;
  hf.activation_profile = ActivationProfile::hf_autocast;
  EXPECT_EQ(elementwise_execution(gpt2, Runtime::colossalai, hf), ElementwiseExecution::hf_gpt2_eager);
  EXPECT_EQ(elementwise_execution(llama, Runtime::colossalai, hf), ElementwiseExecution::hf_llama_eager);
  EXPECT_EQ(elementwise_execution(llama, Runtime::torchtitan, TrainingOptions{}), ElementwiseExecution::torchtitan_llama_eager);
  EXPECT_EQ(elementwise_execution(gpt2, Runtime::colossalai, TrainingOptions{}), ElementwiseExecution::fused);  // the flash profile
  hf.torch_compile = true;
  EXPECT_EQ(elementwise_execution(gpt2, Runtime::colossalai, hf), ElementwiseExecution::fused);
}

TEST(EagerElementwise, TorchCompileChargesWhatTheBlocksKeepInstead) {
  const Model model = shipped_model("gpt2");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const ClusterSpec cluster = make_cluster(h100, 1, 1, 400).value();
  EstimateRequest r;
  r.training.activation_profile = ActivationProfile::hf_autocast;
  r.training.micro_batch_size = 4;
  const auto step = [&](bool compiled) {
    r.training.torch_compile = compiled;
    const MemoryEstimate memory = testing::estimate_or_fail(model, h100, r);
    return simulate_step(model, cluster, r, memory, SimulationSettings{}, false).value().breakdown;
  };
  const StepBreakdown eager = step(false), compiled = step(true);
  // Compiled, each block's kept tensors cross HBM once forward and twice backward; eagerly
  // every op's bytes do, the embedding's and the loss's included (one stage holds all).
  const double kept = static_cast<double>(block_activation_bytes(activation_table(model.config, r.training.activation_profile, r.training.precision),
                                                                 activation_shape(r), RecomputeMode::none)
                                              .stash);
  const double tokens = 4 * 1024, hbm = 3350e9 * 0.8;
  const ElementwiseBytes block = hf_gpt2_eager_block_bytes(model.config, ActivationProfile::hf_autocast, Precision::bf16, 1);
  const OutsideBlocksBytes outside = hf_gpt2_eager_outside_bytes(model.config, ActivationProfile::hf_autocast, Precision::bf16, 1);
  const double forward = (12 * block.forward + outside.first_stage.forward + outside.last_stage.forward) * tokens - 12 * kept;
  const double backward = (12 * block.backward + outside.first_stage.backward + outside.last_stage.backward) * tokens - 2 * 12 * kept;
  EXPECT_NEAR(eager.forward_s - compiled.forward_s, forward / hbm, forward / hbm * 1e-9);
  EXPECT_NEAR(eager.backward_s - compiled.backward_s, backward / hbm, backward / hbm * 1e-9);
}

}  // namespace
}  // namespace tessera::planner
