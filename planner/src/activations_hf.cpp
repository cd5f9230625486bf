// What Hugging Face transformers' modules keep for backward when a model runs
// eagerly with 16-bit weights — how ColossalAI's plugins, DeepSpeed and
// FSDP's MixedPrecision run it (no autocast: the weights themselves are
// bf16/fp16). Not read off the source alone but measured: autograd's
// saved_tensors_hooks list every tensor each op keeps (tools/
// pytorch_saved_tensors.py), on an H100 with torch 2.11.0+cu130 and
// transformers 5.17.0 (data/measurements/2026-11-24-nvidia-h100-80gb-hbm3-
// saved-tensors.json, rows "bf16-weights"). Each term below is one measured
// tensor (or a run of them) with the module that keeps it; the tests hold
// the table to those rows byte for byte.
//
// Where the split over tensor-parallel ranks comes from: these modules run
// whole on one rank; under tensor parallelism (ColossalAI's shardformer,
// Megatron's layout) the terms inside the attention and MLP follow the
// heads and the MLP's width, those on the residual stream the sequence, as
// in Korthikanti's accounting (activations.cpp).
#include "activations_hf.h"

#include "activation_terms.h"

namespace tessera::planner {
namespace {

using Split = ActivationSplit;
constexpr int64_t kInt64 = 8;

ActivationTerm per_key(std::string_view name, int64_t heads, int64_t bytes) {
  return ActivationTerm{name, heads, bytes, true, Split::tensor_parallel, false, false};
}

// A weight-shaped term: autocast's 16-bit copy of a block's matmul weights,
// kept for backward and made again for each micro-batch's forward.
ActivationTerm weight_casts(std::string_view name, int64_t elements, int64_t dt) {
  ActivationTerm t = term(name, elements, dt, Split::tensor_parallel);
  t.per_micro_batch = true;
  return t;
}

// GPT2Block (modeling_gpt2.py): LayerNorm, the fused c_attn, NewGELUActivation.
// Under autocast the residual stream and the LayerNorms stay fp32 and each
// matmul keeps its own 16-bit cast of its input.
void gpt2_block(const ModelConfig& c, int64_t dt, HfRun run, std::vector<ActivationTerm>& b) {
  const int64_t h = c.hidden_size, I = c.intermediate_size;
  const bool autocast = run == HfRun::autocast;
  const int64_t stream = autocast ? kFp32 : dt;  // the residual stream's and the norms' dtype
  ActivationTerm input = term("ln_1_input", h, stream, Split::sequence);  // kept by LayerNorm
  input.is_block_input = true;
  b.push_back(input);
  b.push_back(term("ln_1_mean_rstd", 2, kFp32, Split::sequence));  // native_layer_norm keeps mean and rstd in fp32
  b.push_back(term("c_attn_input", h, dt, Split::sequence));       // the LayerNorm's output (autocast: its 16-bit cast)
  if (run == HfRun::eager_attention) {
    // eager_attention_forward: matmul(q, kᵀ) and matmul(probs, v) keep
    // batched copies of q, kᵀ and v; softmax keeps its output in the
    // weights' dtype; c_proj keeps the reshaped (copied) attention output.
    b.push_back(term("bmm_query_key_value", c.q_width() + 2 * c.kv_width(), dt, Split::tensor_parallel));
    b.push_back(per_key("softmax_output", c.num_heads, dt));
    b.push_back(term("c_proj_input", c.q_width(), dt, Split::tensor_parallel));
  } else {
    // scaled_dot_product_attention (flash backend): c_attn's output, whose
    // views are q, k and v; two of the three views copied into the kernel's
    // layout; its output (also c_proj's input) and an fp32 log-sum-exp per row and head.
    b.push_back(term("c_attn_output", c.q_width() + 2 * c.kv_width(), dt, Split::tensor_parallel));
    b.push_back(term("sdpa_contiguous_copies", c.q_width() + c.kv_width(), dt, Split::tensor_parallel));
    b.push_back(term("attention_output", c.q_width(), dt, Split::tensor_parallel));
    ActivationTerm lse = term("softmax_lse", c.num_heads, kFp32, Split::tensor_parallel);
    lse.kept_under_selective = false;
    b.push_back(lse);
  }
  b.push_back(term("ln_2_input", h, stream, Split::sequence));
  b.push_back(term("ln_2_mean_rstd", 2, kFp32, Split::sequence));
  b.push_back(term("c_fc_input", h, dt, Split::sequence));
  // NewGELUActivation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in Python:
  // its input and three intermediates (x³'s product, tanh's output, 1 + tanh);
  // under autocast pow is on its fp32 list, so the intermediates are fp32.
  b.push_back(term("gelu_input", I, dt, Split::tensor_parallel));
  b.push_back(term("gelu_intermediates", 3 * I, autocast ? kFp32 : dt, Split::tensor_parallel));
  b.push_back(term("mlp_c_proj_input", I, dt, Split::tensor_parallel));
  if (autocast) b.push_back(weight_casts("weight_casts", (c.q_width() + 2 * c.kv_width()) * h + c.q_width() * h + 2 * h * I, dt));
}

// LlamaDecoderLayer (modeling_llama.py; Mistral and Qwen2 share it):
// LlamaRMSNorm in Python, RoPE, grouped-query attention, SwiGLU.
void llama_block(const ModelConfig& c, int64_t dt, HfRun run, std::vector<ActivationTerm>& b) {
  const int64_t h = c.hidden_size, I = c.intermediate_size;
  const bool autocast = run == HfRun::autocast;
  // LlamaRMSNorm: hidden.to(float32) (a copy under 16-bit weights, the fp32
  // residual itself under autocast), its rstd, the normalised
  // hidden.to(input_dtype) that the weight multiplies (fp32 under autocast).
  // Full recompute (gradient_checkpointing_enable: torch.utils.checkpoint
  // around each LlamaDecoderLayer, transformers 4.32.1 modeling_llama.py
  // LlamaModel.forward) keeps the layer's input as it arrives: in the
  // weights' dtype under 16-bit weights, where the norm keeps only its copy.
  const auto rms_norm = [&](std::string_view fp32, std::string_view rstd, std::string_view normalized, bool block_input) {
    ActivationTerm copy = term(fp32, h, kFp32, Split::sequence);
    copy.is_block_input = block_input;
    if (block_input && !autocast) copy.checkpointed_bytes_per_element = dt;
    b.push_back(copy);
    b.push_back(term(rstd, 1, kFp32, Split::sequence));
    b.push_back(term(normalized, h, autocast ? kFp32 : dt, Split::sequence));
  };
  rms_norm("input_norm_fp32_input", "input_norm_rstd", "input_norm_normalized", true);
  // The norm's output, kept once by q_proj, k_proj and v_proj; under
  // autocast each keeps its own 16-bit cast (its cache holds weights only).
  b.push_back(term("qkv_input", (autocast ? 3 : 1) * h, dt, Split::sequence));
  // apply_rotary_pos_emb keeps cos and sin, one row per position shared by the
  // sequences (fp32 under autocast: the rotary embedding computes in fp32).
  ActivationTerm rope = term("rope_cos_sin", 2 * c.head_dim, autocast ? kFp32 : dt, Split::whole);
  rope.per_position = true;
  b.push_back(rope);
  if (run == HfRun::eager_attention) {
    // eager_attention_forward: repeat_kv widens k and v to every head; the
    // two matmuls keep batched q, kᵀ and v; softmax runs in fp32 and keeps
    // its output, the cast back keeps the 16-bit probabilities; o_proj keeps
    // the reshaped (copied) attention output.
    b.push_back(term("bmm_query_key_value", 3 * c.q_width(), dt, Split::tensor_parallel));
    b.push_back(per_key("softmax_output_fp32", c.num_heads, kFp32));
    b.push_back(per_key("probabilities", c.num_heads, dt));
    b.push_back(term("o_proj_input", c.q_width(), dt, Split::tensor_parallel));
  } else {
    // scaled_dot_product_attention with grouped-query k and v: q and k after
    // RoPE, v, the output (also o_proj's input), an fp32 log-sum-exp per row and head.
    b.push_back(term("query_key_value", c.q_width() + 2 * c.kv_width(), dt, Split::tensor_parallel));
    b.push_back(term("attention_output", c.q_width(), dt, Split::tensor_parallel));
    ActivationTerm lse = term("softmax_lse", c.num_heads, kFp32, Split::tensor_parallel);
    lse.kept_under_selective = false;
    b.push_back(lse);
  }
  rms_norm("post_norm_fp32_input", "post_norm_rstd", "post_norm_normalized", false);
  b.push_back(term("mlp_input", (autocast ? 2 : 1) * h, dt, Split::sequence));  // gate_proj's and up_proj's (autocast: each its cast)
  // SwiGLU, down(act(gate(x)) · up(x)): the gate's output, SiLU's output, the
  // up projection's output and their product (down_proj's input).
  b.push_back(term("gate_silu_up_product", 4 * I, dt, Split::tensor_parallel));
  if (autocast) b.push_back(weight_casts("weight_casts", (2 * c.q_width() + 2 * c.kv_width()) * h + 3 * h * I, dt));
}

}  // namespace

bool hf_profile_measured(ModelFamily family) {
  return family == ModelFamily::gpt2 || family == ModelFamily::llama || family == ModelFamily::mistral || family == ModelFamily::qwen2;
}

ActivationTable hf_table(const ModelConfig& c, int64_t dt, HfRun run, TransformersVersion transformers) {
  ActivationTable t;
  const bool gpt2 = c.family == ModelFamily::gpt2, autocast = run == HfRun::autocast;
  if (gpt2) {
    gpt2_block(c, dt, run, t.block);
  } else {
    llama_block(c, dt, run, t.block);
  }
  // The embedding keeps the token ids (int64); GPT-2's position embedding its position ids.
  t.first_stage.push_back(term("input_ids", 1, kInt64, Split::whole));
  if (gpt2) {
    ActivationTerm positions = term("position_ids", 1, kInt64, Split::whole);
    positions.per_position = true;
    t.first_stage.push_back(positions);
  }
  const int64_t h = c.hidden_size, stream = autocast ? kFp32 : dt;
  if (gpt2) {
    t.last_stage.push_back(term("ln_f_input", h, stream, Split::sequence));
    t.last_stage.push_back(term("ln_f_mean_rstd", 2, kFp32, Split::sequence));
  } else {
    t.last_stage.push_back(term("norm_fp32_input", h, kFp32, Split::sequence));
    t.last_stage.push_back(term("norm_rstd", 1, kFp32, Split::sequence));
    t.last_stage.push_back(term("norm_normalized", h, stream, Split::sequence));
  }
  t.last_stage.push_back(term("lm_head_input", h, dt, Split::sequence));
  if (autocast) t.last_stage.push_back(weight_casts("lm_head_weight_cast", c.vocab_size * h, dt));
  // The loss (ForCausalLMLoss, transformers/loss/loss_utils.py: logits.float()
  // then cross_entropy) at its peak, which is early in backward, measured
  // (tools/pytorch_memory_probe.py, every row: the peak above what forward
  // kept is exactly two fp32 tensors of the logits' size, the shifted labels
  // freed): log_softmax's output (kept from forward), nll_loss's dense fp32
  // gradient and log_softmax's input gradient. With 16-bit weights the head's
  // logits are counted too: the model returns them and the training loops of
  // ColossalAI's and DeepSpeed's examples keep the output through backward;
  // the Hugging Face Trainer (autocast) keeps only the loss
  // (Trainer.compute_loss), as tools/pytorch_gpu_baseline.py does. Older
  // releases return fp32 logits, or run the loss on the 16-bit ones
  // (transformers_version.h); autocast runs it in fp32 either way.
  const TransformersBehaviour release = transformers_behaviour(transformers, c.family, run == HfRun::eager_attention);
  if (!autocast) t.logits.push_back(term("model_output_logits", c.vocab_size, release.returns_fp32_logits ? kFp32 : dt, Split::tensor_parallel));
  const int64_t loss = autocast || release.loss_in_fp32 ? kFp32 : dt;
  t.logits.push_back(term("log_softmax_output", c.vocab_size, loss, Split::tensor_parallel));
  t.logits.push_back(term("nll_loss_gradient", c.vocab_size, loss, Split::tensor_parallel));
  t.logits.push_back(term("log_softmax_gradient", c.vocab_size, loss, Split::tensor_parallel));
  // The decoder's [b, 1, s, s] additive mask in the embeddings' dtype, whole
  // on every rank; full recompute keeps it as an input of every layer, once.
  if (release.builds_causal_mask) {
    ActivationTerm mask = term("attention_mask_4d", 1, stream, Split::whole);
    mask.per_key_position = true;
    t.shared_checkpoint_inputs.push_back(mask);
  }
  return t;
}

}  // namespace tessera::planner
