#include "tessera/planner/eager_elementwise.h"

#include <algorithm>

#include "tessera/planner/op_checkpoint_policy.h"

namespace tessera::planner {
namespace {

// An RMSNorm written in Python, as torchtitan's and Hugging Face's LlamaRMSNorm are,
// per element of its input of `d` bytes.
ElementwiseBytes python_rms_norm_bytes(double d) {
  constexpr double f = 4;  // fp32, where the norm computes
  const double cast = cast_bytes(d, f);
  // Forward: the cast up, pow (read, write), mean (read), x * rsqrt (read, write), the cast down, * weight (read, write).
  // Backward: * weight (the input's gradient read and written, the weight's read from the gradient and
  // the saved output), the cast down's, x * rsqrt (the gradient times rsqrt read and written, the row
  // sums of gradient × x read), mean's (the expanded gradient written), pow's (gradient and x read,
  // written), the two gradients of x added, the cast up's.
  return {cast + 2 * f + f + 2 * f + cast + 2 * d, 4 * d + cast + 4 * f + f + 3 * f + 3 * f + cast};
}

// torchtitan's Triton RMSNorm (FusedRMSNorm, torchtitan@0413364 models/norms.py),
// per element: forward reads x and writes y; backward reads dy and x and writes dx
// (the per-row rstd and the weight's per-SM partial sums are small).
ElementwiseBytes triton_rms_norm_bytes(double d) { return {2 * d, 3 * d}; }

// torchtitan's RMSNorm as the run chose it (PluginOptions::fused_rmsnorm).
ElementwiseBytes torchtitan_rms_norm_bytes(double d, bool fused) { return fused ? triton_rms_norm_bytes(d) : python_rms_norm_bytes(d); }

// An embedding lookup per element of its output: the gathered row written; in backward the
// gradient read and added into the weight's gradient row (read, write).
ElementwiseBytes embedding_lookup_bytes(double d) { return {d, 3 * d}; }

// The dtypes of Hugging Face GPT-2's ops, bytes per element (eager_elementwise.h).
struct HfDtypes {
  double gemm;      // GEMM inputs and outputs: the compute dtype
  double residual;  // the residual stream, LayerNorm's input and output, the embeddings
  double gelu;      // the GELU chain from pow on
};

HfDtypes hf_dtypes(ActivationProfile profile, Precision precision) {
  const auto d = static_cast<double>(compute_bytes(precision));
  // Under autocast the weights, hence the embeddings, are fp32, and layer_norm and pow autocast to fp32.
  if (profile == ActivationProfile::hf_autocast) return {d, 4, 4};
  return {d, d, d};
}

// The cross-entropy over `vocab` logits of `logits_bytes` each, run in
// `loss_bytes` (the logits cast first where the two differ): the cast,
// log_softmax (read, write); in backward nll_loss's gradient written,
// log_softmax's backward (two reads, a write) and the cast's. Per token.
ElementwiseBytes cross_entropy_bytes(int64_t vocab, double logits_bytes, double loss_bytes) {
  const double cast = cast_bytes(logits_bytes, loss_bytes), f = loss_bytes;
  return {static_cast<double>(vocab) * (cast + 2 * f), static_cast<double>(vocab) * (f + 3 * f + cast)};
}

// Hugging Face's causal-LM loss on `a`-byte logits as a release runs it
// (transformers_version.h). 5.x's ForCausalLMLoss upcasts and shifts the
// labels; 4.31-4.33 shift the logits, `logits[..., :-1, :].contiguous()`, a
// copy (read, write) whose slice's gradient backward zero-fills and copies
// into (a write, a read and a write): Llama's fp32 logits after the model's
// `logits.float()`, GPT-2's 16-bit ones, its cross-entropy on them too (fp32
// under autocast, which casts log_softmax's input).
ElementwiseBytes hf_loss_bytes(const ModelConfig& c, ActivationProfile profile, double a, int64_t tp, TransformersVersion transformers) {
  const TransformersBehaviour release = transformers_behaviour(transformers, c.family, profile == ActivationProfile::hf_eager);
  const double loss = release.loss_in_fp32 || profile == ActivationProfile::hf_autocast ? 4 : a;
  const int64_t vocab = c.vocab_size / tp;
  ElementwiseBytes bytes = cross_entropy_bytes(vocab, a, loss);
  if (release.shifts_logits) {
    const double copied = release.returns_fp32_logits ? 4 : a;
    bytes.forward += static_cast<double>(vocab) * 2 * copied;
    bytes.backward += static_cast<double>(vocab) * 3 * copied;
  }
  return bytes;
}

}  // namespace

double cast_bytes(double from, double to) { return from == to ? 0 : from + to; }

ElementwiseExecution elementwise_execution(const ModelConfig& config, Runtime runtime, const TrainingOptions& training) {
  if (training.torch_compile) return ElementwiseExecution::fused;
  if (runtime == Runtime::torchtitan && is_torchtitan_llama_block(config)) return ElementwiseExecution::torchtitan_llama_eager;
  if (training.activation_profile == ActivationProfile::megatron) return ElementwiseExecution::megatron_lm_kernels;
  if (!runs_hugging_face_modules(training.activation_profile)) return ElementwiseExecution::fused;
  switch (config.family) {
    case ModelFamily::gpt2: return ElementwiseExecution::hf_gpt2_eager;
    case ModelFamily::llama:
    case ModelFamily::mistral:
    case ModelFamily::qwen2: return ElementwiseExecution::hf_llama_eager;  // LlamaDecoderLayer's ops (modeling_llama.py; Mistral and Qwen2 share them)
    case ModelFamily::opt:
    case ModelFamily::bloom:
    case ModelFamily::gpt_neox: break;  // the hf profiles refuse these (validate_request.cpp)
  }
  return ElementwiseExecution::fused;
}

ElementwiseBytes torchtitan_eager_block_bytes(const ModelConfig& c, int64_t dtype_bytes, bool fused_rmsnorm) {
  const auto d = static_cast<double>(dtype_bytes);  // the activations' dtype
  constexpr double f = 4;                            // fp32, where RoPE computes
  const double cast = cast_bytes(d, f);
  const auto h = static_cast<double>(c.hidden_size);
  const auto q = static_cast<double>(c.q_width());
  const auto kv = static_cast<double>(c.kv_width());
  const auto I = static_cast<double>(c.intermediate_size);
  const ElementwiseBytes norm = torchtitan_rms_norm_bytes(d, fused_rmsnorm);
  // Per element of q and k: the cast up, the complex multiply (read, write), the cast down; backward the same.
  const double rope = cast + 2 * f + cast;
  // repeat_kv copies keys and values from kv_width to q_width (summed back in backward).
  const double repeat = c.num_kv_heads < c.num_heads ? 2 * d * (kv + q) : 0;
  const double residual = 2 * 3 * d * h;  // two adds: two reads, one write; backward, two gradient sums
  // The input gradients of wq, wk, wv summed (two adds: two reads, a write), and of w1 and w3 (one).
  const double projection_sums = 3 * 3 * d * h;
  // SwiGLU: SiLU (read, write) and the product (two reads, one write); backward the
  // product's two gradients (four reads, two writes) and SiLU's (two reads, one write).
  const double swiglu_forward = 5 * d * I;
  const double swiglu_backward = 9 * d * I;
  return ElementwiseBytes{2 * norm.forward * h + rope * (q + kv) + repeat + residual + swiglu_forward,
                          2 * norm.backward * h + rope * (q + kv) + repeat + residual + projection_sums + swiglu_backward};
}

OutsideBlocksBytes torchtitan_eager_outside_bytes(const ModelConfig& c, int64_t dtype_bytes, bool fused_rmsnorm) {
  // The token embedding (pytorch/torchtitan@3c77e9fa, models/llama/model.py Transformer.forward),
  // the final RMSNorm and the output layer's logits upcast to fp32 for the loss (`.float()`).
  const auto d = static_cast<double>(dtype_bytes);
  const auto h = static_cast<double>(c.hidden_size);
  const ElementwiseBytes embedding = embedding_lookup_bytes(d);
  const ElementwiseBytes norm = torchtitan_rms_norm_bytes(d, fused_rmsnorm);
  const ElementwiseBytes loss = upcast_cross_entropy_bytes(c.vocab_size, dtype_bytes);
  return {{embedding.forward * h, embedding.backward * h}, {norm.forward * h + loss.forward, norm.backward * h + loss.backward}};
}

ElementwiseBytes hf_gpt2_eager_block_bytes(const ModelConfig& c, ActivationProfile profile, Precision precision, int64_t tp) {
  const auto [a, r, g] = hf_dtypes(profile, precision);
  const double to_gemm = cast_bytes(r, a);  // a residual-dtype tensor cast for a GEMM (and its gradient cast back)
  const double gelu_cast = cast_bytes(a, g);
  const auto h = static_cast<double>(c.hidden_size);
  const double I = static_cast<double>(c.intermediate_size) / static_cast<double>(tp);
  const double qkv = 3 * h / static_cast<double>(tp);
  // Per hidden element, forward: ln_1 and ln_2 (read, write), each norm's output cast
  // for c_attn and c_fc, the two residual adds (a GEMM output and the stream read, the
  // stream written).
  const double hidden_forward = 2 * 2 * r + 2 * to_gemm + 2 * (a + 2 * r);
  // The attention's copies (read, write), as the saved-tensor measurement finds them
  // (activations_hf.cpp): SDPA copies two of the q, k, v views into its kernel's layout
  // (its output it writes in the layout c_proj reads); eager attention copies q, kᵀ and v
  // for its batched matmuls and its output for c_proj. Their gradients come back as views.
  const double copied = profile == ActivationProfile::hf_eager ? 2 * c.q_width() + 2 * c.kv_width() : c.q_width() + c.kv_width();
  const double attention_copies = 2 * a * copied / static_cast<double>(tp);
  // Backward: at each residual add the branch's gradient cast to the GEMM dtype and, where
  // the stream meets the norm's input, the two gradients summed (two reads, a write); each
  // LayerNorm's backward (the gradient and input read, the input's gradient written, both
  // read again for the weight and bias gradients); each cast's gradient cast back; the two
  // output projections' bias gradients (the gradient read).
  const double hidden_backward = 2 * (to_gemm + 3 * r) + 2 * 5 * r + 2 * to_gemm + 2 * a;
  // Per element of q, k and v (c_attn's output): their three gradients concatenated (read,
  // write) and c_attn's bias gradient (read).
  const double qkv_backward = 2 * a + a;
  // Per MLP element, forward: c_fc's output cast to the GELU's dtype for pow, pow and the
  // two scalar products, tanh and 1 + (each a read and a write), x + 0.044715·x³ and the
  // final product (each reading x or 0.5·x and the chain, writing the chain), 0.5·x (read,
  // write); the GELU's output cast for c_proj.
  const double mlp_forward = gelu_cast + 5 * 2 * g + 2 * (a + 2 * g) + 2 * a + gelu_cast;
  // Backward: c_proj's input cast back; the product's two gradients (grad·v: two reads, a
  // write, cast to x's dtype; grad·0.5x: two reads, a write); tanh's (output and gradient
  // read, written); the two scalar products' (read, write); the add's gradient to x cast;
  // pow's (grad · 3 · x²: x² read and written, times 3 read and written, times the gradient
  // two reads and a write); the cast up's; 0.5·x's (read, write); x's three gradients
  // summed (two adds); c_fc's bias gradient (read).
  const double mlp_backward = gelu_cast + (3 * g + gelu_cast) + (2 * g + a) + 3 * g + 2 * 2 * g + gelu_cast + 7 * g + gelu_cast + 2 * a +
                              2 * 3 * a + a;
  return {hidden_forward * h + attention_copies + mlp_forward * I, hidden_backward * h + qkv_backward * qkv + mlp_backward * I};
}

ElementwiseBytes hf_llama_eager_block_bytes(const ModelConfig& c, ActivationProfile profile, Precision precision, int64_t tp) {
  const HfDtypes dtypes = hf_dtypes(profile, precision);
  const double a = dtypes.gemm, r = dtypes.residual;
  const double to_gemm = cast_bytes(r, a);
  const auto h = static_cast<double>(c.hidden_size);
  const auto split = [tp](int64_t width) { return static_cast<double>(width) / static_cast<double>(tp); };
  const double q = split(c.q_width()), kv = split(c.kv_width()), I = split(c.intermediate_size);
  const ElementwiseBytes norm = python_rms_norm_bytes(r);  // the stream's dtype in and out
  // Per hidden element, forward: the two norms; under autocast q_proj, k_proj, v_proj,
  // gate_proj and up_proj each cast the norm's output (the measured saved tensors hold five
  // 16-bit copies); the two residual adds. Backward: the norms'; the five casts back; the
  // input gradients of q, k, v summed (two adds) and of gate and up (one); at each residual
  // add the branch's gradient cast and the stream's two gradients summed.
  const double hidden_forward = 2 * norm.forward + 5 * to_gemm + 2 * (a + 2 * r);
  const double hidden_backward = 2 * norm.backward + 5 * to_gemm + 3 * 3 * r + 2 * (to_gemm + 3 * r);
  // apply_rotary_pos_emb on q and k, per element: q·cos (cos in the stream's dtype, so the
  // product is in the wider one, o), rotate_half's negation of one half and concatenation,
  // its product with sin, the sum, and the cast back for attention; backward the sum's
  // gradient cast, each product's gradient (read, write) cast to its input's dtype, the
  // negation's, and the two gradients of q summed.
  const double o = std::max(a, r);
  const double rope_forward = (a + o) + a + 2 * a + (a + o) + 3 * o + cast_bytes(o, a);
  const double rope_backward = cast_bytes(a, o) + 2 * (2 * o + cast_bytes(o, a)) + a + 3 * a;
  // Attention's copies (read, write). SDPA takes grouped-query k and v as they are
  // (enable_gqa) and writes its output in o_proj's layout. Eager attention widens k and v
  // to every head (repeat_kv; summed back in backward), copies q, kᵀ and v for its batched
  // matmuls and its output for o_proj (their gradients come back as views).
  const bool eager_attention = profile == ActivationProfile::hf_eager;
  const double copies_forward = eager_attention ? 2 * a * (kv + q) + 3 * 2 * a * q + 2 * a * q : 0;
  const double copies_backward = eager_attention ? 2 * a * (q + kv) : 0;
  // Qwen2's q, k, v biases: their gradients read the projections' output gradients.
  const double bias_backward = c.qkv_bias ? a * (q + 2 * kv) : 0;
  // SwiGLU as torchtitan's: SiLU and the product forward, their gradients backward.
  return {hidden_forward * h + rope_forward * (q + kv) + copies_forward + 5 * a * I,
          hidden_backward * h + rope_backward * (q + kv) + copies_backward + bias_backward + 9 * a * I};
}

OutsideBlocksBytes hf_llama_eager_outside_bytes(const ModelConfig& c, ActivationProfile profile, Precision precision, int64_t tp,
                                                TransformersVersion transformers) {
  const HfDtypes dtypes = hf_dtypes(profile, precision);
  const auto h = static_cast<double>(c.hidden_size);
  // embed_tokens (the stream's dtype: fp32 weights under autocast), the final norm and lm_head's input cast, the loss.
  const ElementwiseBytes lookup = embedding_lookup_bytes(dtypes.residual);
  const ElementwiseBytes norm = python_rms_norm_bytes(dtypes.residual);
  const double to_gemm = cast_bytes(dtypes.residual, dtypes.gemm);
  const ElementwiseBytes loss = hf_loss_bytes(c, profile, dtypes.gemm, tp, transformers);
  return {{lookup.forward * h, lookup.backward * h},
          {(norm.forward + to_gemm) * h + loss.forward, (norm.backward + to_gemm) * h + loss.backward}};
}

OutsideBlocksBytes hf_gpt2_eager_outside_bytes(const ModelConfig& c, ActivationProfile profile, Precision precision, int64_t tp,
                                               TransformersVersion transformers) {
  const auto [a, r, g] = hf_dtypes(profile, precision);
  const auto h = static_cast<double>(c.hidden_size);
  // wte and wpe looked up and added (two reads, a write; backward the gradient passes to both).
  const ElementwiseBytes lookup = embedding_lookup_bytes(r);
  const ElementwiseBytes embedding{2 * lookup.forward + 3 * r, 2 * lookup.backward};
  // ln_f and its output cast for the head, as in a block; then the loss on this rank's vocabulary share.
  const ElementwiseBytes ln_f{2 * r + cast_bytes(r, a), 5 * r + cast_bytes(a, r)};
  const ElementwiseBytes loss = hf_loss_bytes(c, profile, a, tp, transformers);
  return {{embedding.forward * h, embedding.backward * h}, {ln_f.forward * h + loss.forward, ln_f.backward * h + loss.backward}};
}

ElementwiseBytes hf_eager_attention_score_bytes(const ModelConfig& c, Precision precision, int64_t tp, int64_t seq_len) {
  const auto a = static_cast<double>(compute_bytes(precision));
  constexpr double f = 4, mask = 1;
  const double scores = static_cast<double>(c.num_heads) / static_cast<double>(tp) * static_cast<double>(seq_len);
  const double dropout = c.attention_dropout > 0 ? 2 * a + mask : 0;  // each way: read, written with (or read with) the mask
  if (c.family == ModelFamily::gpt2) {
    // Forward: the division, where, softmax, dropout. Backward: dropout's, softmax's, where's, the division's.
    return {scores * (2 * a + (2 * a + mask) + 2 * a + dropout), scores * (dropout + 3 * a + (2 * a + mask) + 2 * a)};
  }
  // softmax(dtype=float32) reads fp16 scores as they are, and its backward writes fp16; other dtypes are cast first.
  const bool half = precision == Precision::fp16;
  const double softmax_forward = half ? a + f : cast_bytes(a, f) + 2 * f;
  const double softmax_backward = half ? 2 * f + a : 3 * f + cast_bytes(f, a);
  // Forward: the scaling, the mask added, softmax, the cast back, dropout. Backward in reverse (the mask has no gradient).
  return {scores * (2 * a + 3 * a + softmax_forward + cast_bytes(f, a) + dropout),
          scores * (dropout + cast_bytes(a, f) + softmax_backward + 2 * a)};
}

ElementwiseBytes upcast_cross_entropy_bytes(int64_t vocab, int64_t logits_bytes) {
  return cross_entropy_bytes(vocab, static_cast<double>(logits_bytes), 4);
}

}  // namespace tessera::planner
