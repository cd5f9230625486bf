// A transformer's shape as read from a Hugging Face config.json.
//
// The reader accepts the field aliases Hugging Face accepts (n_embd / n_embed /
// hidden_size, n_layer / num_hidden_layers, n_head / num_attention_heads, ...)
// and fills the fields a family's config class defaults (transformers'
// GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, OPTConfig, BloomConfig,
// GPTNeoXConfig). The four size fields (hidden size, layers, heads, vocabulary)
// are required: configs on the Hub always carry them, and silently assuming a
// default shape is exactly the guess Tessera exists to remove.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/planner/status.h"

namespace tessera::planner {

enum class ModelFamily { gpt2, llama, mistral, qwen2, opt, bloom, gpt_neox };

std::string_view to_string(ModelFamily family);

enum class NormKind { layer_norm, rms_norm };

// gelu: two matrices with an element-wise activation between (GELU, ReLU).
// swiglu: gate, up and down matrices, down(silu(gate(x)) * up(x)) (Shazeer 2020).
enum class MlpKind { gelu, swiglu };

struct ModelConfig {
  std::string name;          // registry name or the file's stem
  ModelFamily family = ModelFamily::gpt2;
  std::string model_type;    // as written in the file

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;       // == num_heads without grouped-query attention
  int64_t head_dim = 0;           // hidden_size / num_heads unless the config says otherwise
  int64_t intermediate_size = 0;  // MLP width
  int64_t max_positions = 0;      // context length the position table covers

  NormKind norm = NormKind::layer_norm;
  MlpKind mlp = MlpKind::gelu;
  bool tie_word_embeddings = true;
  bool qkv_bias = true;          // bias on the query/key/value projections
  bool attn_out_bias = true;     // bias on the attention output projection
  bool mlp_bias = true;          // bias on the MLP matrices
  bool learned_positions = true; // a position-embedding table (GPT-2, OPT)
  int64_t position_offset = 0;   // OPT stores max_positions + 2 rows
  bool embedding_norm = false;   // BLOOM's word_embeddings_layernorm
  bool final_norm = true;        // a norm before the output head
  bool parallel_residual = false;// GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x))
  double rotary_pct = 0.0;       // fraction of head_dim rotated (RoPE); 0 without rotary
  double rope_theta = 10000.0;   // RoPE base (rope_theta / rotary_emb_base)
  double norm_eps = 1e-5;        // layer_norm_epsilon / rms_norm_eps / layer_norm_eps
  int64_t word_embed_proj_dim = 0;  // OPT's project_in/out width; == hidden_size when absent

  // What the arithmetic depends on beyond the shapes. The planner's figures do
  // not, but a run that ignored them would train another model, so the engine
  // refuses values it does not compute.
  std::string activation;        // activation_function (GPT-2) or hidden_act; the family's default when absent
  int64_t sliding_window = 0;    // attention window transformers applies (Mistral, Qwen2: sliding_window); 0: every earlier token
  std::string rope_scaling;      // the RoPE scaling's rope_type (or type); empty without scaling or for "default"
  std::string rope_scaling_field;// where that scaling is set: "rope_scaling" or "rope_parameters" (transformers 5)
  bool standard_attention_scale = true;  // GPT-2: scale_attn_weights and not scale_attn_by_inverse_layer_idx

  // Dropout probabilities; they decide which masks the Megatron activation profile keeps.
  double attention_dropout = 0.0;
  double hidden_dropout = 0.0;
  double embedding_dropout = 0.0;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  // ALiBi (BLOOM): neither a position table nor rotary positions.
  bool alibi_positions() const { return !learned_positions && rotary_pct == 0; }
};

// Parses the text of a Hugging Face config.json. `source` names the file in errors.
Result<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source);

// Reads and parses a config.json from disk (or the config.json inside a model
// directory); the model's name is the file's stem, or the directory's name.
// Errors start with `field`, the option or key that gave the path.
Result<ModelConfig> load_model_config_file(const std::string& path, const std::string& field);

}  // namespace tessera::planner
