// Megatron-LM's block kernel by kernel; the reading is in megatron_elementwise.h.
#include "tessera/planner/megatron_elementwise.h"

#include <algorithm>
#include <array>

#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/vocab_parallel_loss.h"

namespace tessera::planner {
namespace {

// The hidden sizes apex's persistent LayerNorm kernel takes (fused_layer_norm.py,
// persist_ln_hidden_sizes); the others run Megatron's own kernel.
constexpr std::array<int64_t, 24> kPersistentLayerNormSizes{1024,  1536,  2048,  2304,  3072,  3840,  4096,  5120,
                                                            6144,  8192,  10240, 12288, 12800, 15360, 16384, 18432,
                                                            20480, 24576, 25600, 30720, 32768, 40960, 49152, 65536};

// A LayerNorm per element: forward the input read and the output written;
// backward the output's gradient and the input read, the input's gradient
// written. The persistent kernel does that in one pass; Megatron's own
// (layer_norm_cuda_kernel.cu, cuComputePartGradGammaBeta then
// cuComputeGradInput) reads the gradient and the input twice. RMSNorm alike.
ElementwiseBytes norm_bytes(const ModelConfig& c, double d) {
  const bool persistent = std::ranges::find(kPersistentLayerNormSizes, c.hidden_size) != kPersistentLayerNormSizes.end();
  return {2 * d, (persistent ? 3 : 5) * d};
}

}  // namespace

ElementwiseBytes megatron_lm_core_bytes(const ModelConfig& c, int64_t dtype_bytes, int64_t tp, int64_t seq_len) {
  const auto d = static_cast<double>(dtype_bytes);
  const auto t = static_cast<double>(tp);
  const double q = static_cast<double>(c.q_width()) / t;
  const double kv = static_cast<double>(c.kv_width()) / t;
  const double scores = static_cast<double>(c.num_heads) / t * static_cast<double>(seq_len);  // per query: every key's score
  ElementwiseBytes bytes;
  if (d < 4 && seq_len <= kFusedCausalSoftmaxMaxKeys) {
    // The fused causal kernel reads a row's unmasked keys and writes the whole row, forward and backward.
    const double unmasked = causal_keys_per_query(seq_len, 0) / static_cast<double>(seq_len);
    bytes.forward += scores * (unmasked * d + d);
    bytes.backward += scores * (unmasked * 2 * d + d);
  } else {
    // forward_torch_softmax: the cast up (16-bit scores, --attention-softmax-in-fp32 implied by the
    // default layer scaling), the scaling by the layer number, masked_fill_ with the causal mask,
    // softmax, the cast down; backward each one's gradient.
    const double f = 4;
    const double cast = cast_bytes(d, f);
    bytes.forward += scores * (cast + 2 * f + (2 * f + 1) + 2 * f + cast);
    bytes.backward += scores * (cast + 3 * f + (2 * f + 1) + 2 * f + cast);
  }
  if (c.alibi_positions()) {
    // ALiBi (BLOOM in Megatron-DeepSpeed): baddbmm's input is the [b·heads, 1, s] bias, which
    // PyTorch copies out to every query's row before the GEMM adds into it (beta ≠ 0): a write
    // and a read of every score.
    bytes.forward += scores * 2 * d;
  }
  if (c.attention_dropout > 0) {
    bytes.forward += scores * (2 * d + 1);   // read, written with its one-byte mask
    bytes.backward += scores * (2 * d + 1);  // the gradient and the mask read, the gradient written
  }
  bytes.forward += 2 * d * q;              // the context's permute(...).contiguous()
  bytes.backward += 2 * d * (q + kv);      // baddbmm's alpha applied to dQ and dK
  return bytes;
}

ElementwiseBytes megatron_lm_block_bytes(const ModelConfig& c, int64_t dtype_bytes, int64_t tp, bool sequence_parallel, int64_t seq_len) {
  const auto d = static_cast<double>(dtype_bytes);
  const auto t = static_cast<double>(tp);
  // The residual stream's elements per token on this rank: all of h, or 1/tp of the tokens under sequence parallelism.
  const double h = static_cast<double>(c.hidden_size) / (sequence_parallel ? t : 1);
  const double q = static_cast<double>(c.q_width()) / t;
  const double kv = static_cast<double>(c.kv_width()) / t;
  const double qkv = q + 2 * kv;
  const double ffn = static_cast<double>(c.intermediate_size) / t;
  const double hidden_mask = c.hidden_dropout > 0 ? 1 : 0;  // one byte per element

  ElementwiseBytes bytes = megatron_lm_core_bytes(c, dtype_bytes, tp, seq_len);
  const ElementwiseBytes norm = norm_bytes(c, d);
  bytes.forward += 2 * norm.forward * h;
  bytes.backward += 2 * norm.backward * h + 2 * 3 * d * h;  // the two norms; the two residual sums

  if (c.qkv_bias) {
    bytes.forward += 2 * d * qkv;  // `output + bias` after the GEMM
    bytes.backward += d * qkv;     // grad_output.sum(dim=0)
  }
  bytes.backward += 2 * d * qkv;  // q, k and v's gradients concatenated
  if (c.rotary_pct > 0) {
    const double rotated = (q + kv) * c.rotary_pct;
    bytes.forward += 2 * d * rotated;
    bytes.backward += 2 * d * rotated;
  }

  // Bias-dropout-add after attention and after the MLP.
  const auto bias_dropout_add = [&](bool bias) {
    bytes.forward += (3 * d + hidden_mask) * h;
    bytes.backward += (2 * d + hidden_mask + (bias ? d : 0)) * h;
  };
  bias_dropout_add(c.attn_out_bias);
  bias_dropout_add(c.mlp_bias);

  if (c.mlp == MlpKind::swiglu) {
    bytes.forward += 5 * d * ffn;  // SiLU (read, write), the product (two reads, a write)
    bytes.backward += 9 * d * ffn;
  } else {
    bytes.forward += 2 * d * ffn;                          // bias_gelu, or the activation alone
    bytes.backward += 3 * d * ffn + (c.mlp_bias ? d * ffn : 0);  // bias_gelu_back; fc1's bias gradient
  }
  return bytes;
}

OutsideBlocksBytes megatron_lm_outside_bytes(const ModelConfig& c, int64_t dtype_bytes, int64_t tp, bool sequence_parallel,
                                             bool cross_entropy_loss_fusion) {
  const auto d = static_cast<double>(dtype_bytes);
  const auto h = static_cast<double>(c.hidden_size);
  const double per_rank = sequence_parallel ? 1 / static_cast<double>(tp) : 1;  // the dropout on this rank's tokens
  const double mask = c.embedding_dropout > 0 ? 1 : 0;
  // Lookups write a row each and add their gradient into the table (read, write) in backward.
  const ElementwiseBytes lookup{d, 3 * d};
  const double tables = c.learned_positions ? 2 : 1;
  ElementwiseBytes first{tables * lookup.forward + (tables - 1) * 3 * d + 2 * d + (2 * d + mask) * per_rank,
                         tables * lookup.backward + (2 * d + mask) * per_rank};
  if (c.embedding_norm) {
    first.forward += norm_bytes(c, d).forward;
    first.backward += norm_bytes(c, d).backward;
  }
  // The final LayerNorm runs where the stream is; the loss over this rank's share of the vocabulary.
  const ElementwiseBytes final_norm = c.final_norm ? norm_bytes(c, d) : ElementwiseBytes{};
  const ElementwiseBytes loss = vocab_parallel_cross_entropy_bytes(c, tp, dtype_bytes, cross_entropy_loss_fusion);
  return {{first.forward * h, first.backward * h},
          {final_norm.forward * h * per_rank + loss.forward, final_norm.backward * h * per_rank + loss.backward}};
}

}  // namespace tessera::planner
