#include "tessera/planner/runtime_models.h"

#include <cmath>

#include "tessera/planner/op_checkpoint_policy.h"

namespace tessera::planner {

std::optional<std::string> megatron_cannot_build(const ModelConfig& c, int64_t seq_len) {
  if (c.embedding_norm) return "a LayerNorm after the embedding (BLOOM's word_embeddings_layernorm)";
  if (c.alibi_positions()) return "no position embedding or rotary positions (ALiBi)";
  if (c.parallel_residual) return "parallel attention and MLP residuals (GPT-NeoX)";
  if (c.position_offset != 0 || (c.word_embed_proj_dim != 0 && c.word_embed_proj_dim != c.hidden_size)) return "OPT's offset positions or projected embeddings";
  const bool gelu = c.mlp == MlpKind::gelu && (c.activation == "gelu" || c.activation == "gelu_new" || c.activation == "gelu_pytorch_tanh");
  const bool swiglu = c.mlp == MlpKind::swiglu && c.activation == "silu";
  if (!gelu && !swiglu) return "the activation " + c.activation;
  if (!c.final_norm) return "no norm before the output head";
  if (!c.standard_attention_scale) return "attention scores not scaled by 1/sqrt(head_dim)";
  if (c.sliding_window > 0 && c.sliding_window < seq_len) return "a sliding attention window of " + std::to_string(c.sliding_window) + " tokens";
  if (!c.rope_scaling.empty()) return "RoPE scaling (" + c.rope_scaling + ")";
  if (!c.learned_positions && c.rope_theta != std::floor(c.rope_theta)) return "a fractional RoPE base (--rotary-base takes an integer)";
  const bool all_biases = c.qkv_bias && c.attn_out_bias && c.mlp_bias;
  const bool qkv_only = c.qkv_bias && !c.attn_out_bias && !c.mlp_bias;
  const bool none = !c.qkv_bias && !c.attn_out_bias && !c.mlp_bias;
  if (!all_biases && !qkv_only && !none) return "biases on some linear layers but not the q/k/v ones alone";
  if (c.embedding_dropout != c.hidden_dropout) return "an embedding dropout unlike its hidden dropout";
  return std::nullopt;
}

std::optional<std::string> torchtitan_cannot_build(const ModelConfig& c) {
  if (!is_torchtitan_llama_block(c)) return "a block unlike Llama's (its family, MLP, residual or dropout)";
  if (c.norm != NormKind::rms_norm) return "LayerNorm";
  if (c.activation != "silu") return "the activation " + c.activation;
  if (c.qkv_bias || c.attn_out_bias || c.mlp_bias) return "biases on its linear layers";
  if (c.tie_word_embeddings) return "an output head tied to the embeddings";
  if (c.learned_positions || c.rotary_pct != 1.0) return "positions other than RoPE over the whole head";
  if (c.sliding_window > 0) return "a sliding attention window";
  if (c.embedding_norm || !c.final_norm || !c.standard_attention_scale) return "a block unlike Llama's";
  return std::nullopt;
}

}  // namespace tessera::planner
