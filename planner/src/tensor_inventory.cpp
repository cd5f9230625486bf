// Builds the parameter inventory of each supported family with the tensor names
// of the matching transformers class (GPT2LMHeadModel, LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, OPTForCausalLM, BloomForCausalLM,
// GPTNeoXForCausalLM). Shapes follow the state dict: torch.nn.Linear stores
// (out, in); GPT-2's Conv1D stores (in, out).
#include "tessera/planner/tensor_inventory.h"

#include <algorithm>
#include <numeric>

#include "tessera/planner/module_order.h"

namespace tessera::planner {
namespace {

class InventoryBuilder {
 public:
  explicit InventoryBuilder(TensorInventory& inventory) : inventory_(inventory) {}

  int add(std::string name, std::vector<int64_t> shape, int layer, TpSplit split, bool matmul = false, int tp_dim = 0, int tp_parts = 1) {
    inventory_.tensors.push_back(TensorInfo{std::move(name), std::move(shape), layer, split, matmul, -1, tp_dim, tp_parts});
    return static_cast<int>(inventory_.tensors.size()) - 1;
  }

  // A linear layer in torch.nn.Linear layout (out, in) plus an optional bias.
  // Column-parallel layers split the output features (and the bias);
  // row-parallel ones the input features, and replicate the bias. Fused
  // query-key-value layers of BLOOM and GPT-NeoX lay their heads out one after
  // another, so a plain split of the outputs gives each rank whole heads.
  void linear(const std::string& prefix, int64_t out, int64_t in, int layer, bool bias, bool column_parallel) {
    add(prefix + ".weight", {out, in}, layer, TpSplit::split, true, column_parallel ? 0 : 1);
    if (bias) add(prefix + ".bias", {out}, layer, column_parallel ? TpSplit::split : TpSplit::replicated);
  }

  // GPT-2's Conv1D stores the weight transposed: (in, out). `parts`: its
  // c_attn holds all queries, then all keys, then all values (as wide as the
  // queries in GPT-2; narrower under grouped-query attention, as in
  // Megatron-Core's GPT with --num-query-groups).
  void conv1d(const std::string& prefix, int64_t in, int64_t out, int layer, bool column_parallel, int parts = 1) {
    add(prefix + ".weight", {in, out}, layer, TpSplit::split, true, column_parallel ? 1 : 0, parts);
    add(prefix + ".bias", {out}, layer, column_parallel ? TpSplit::split : TpSplit::replicated, false, 0, parts);
  }

  void norm(const std::string& prefix, int64_t width, int layer, bool bias) {
    add(prefix + ".weight", {width}, layer, TpSplit::replicated);
    if (bias) add(prefix + ".bias", {width}, layer, TpSplit::replicated);
  }

  // The output head: its own tensor, or an alias of the input embedding when tied.
  void head(const std::string& name, int64_t vocab, int64_t width, int layer, bool tied, int embedding_index) {
    const int index = add(name, {vocab, width}, layer, TpSplit::vocab, true);
    if (tied) inventory_.tensors[index].tied_to = embedding_index;
  }

 private:
  TensorInventory& inventory_;
};

std::string block(const std::string& prefix, int i) { return prefix + "." + std::to_string(i); }

void build_gpt2(const ModelConfig& c, InventoryBuilder& b) {
  const int64_t h = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const int wte = b.add("transformer.wte.weight", {c.vocab_size, h}, kEmbeddingLayer, TpSplit::vocab);
  b.add("transformer.wpe.weight", {c.max_positions, h}, kEmbeddingLayer, TpSplit::replicated);
  for (int i = 0; i < L; ++i) {
    const std::string p = block("transformer.h", i);
    b.norm(p + ".ln_1", h, i, true);
    b.conv1d(p + ".attn.c_attn", h, c.q_width() + 2 * c.kv_width(), i, true, 3);
    b.conv1d(p + ".attn.c_proj", h, h, i, false);
    b.norm(p + ".ln_2", h, i, true);
    b.conv1d(p + ".mlp.c_fc", h, c.intermediate_size, i, true);
    b.conv1d(p + ".mlp.c_proj", c.intermediate_size, h, i, false);
  }
  b.norm("transformer.ln_f", h, L, true);
  b.head("lm_head.weight", c.vocab_size, h, L, c.tie_word_embeddings, wte);
}

// Llama, Mistral and Qwen2 share LlamaForCausalLM's layout; they differ in biases.
void build_llama_like(const ModelConfig& c, InventoryBuilder& b) {
  const int64_t h = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const int embed = b.add("model.embed_tokens.weight", {c.vocab_size, h}, kEmbeddingLayer, TpSplit::vocab);
  for (int i = 0; i < L; ++i) {
    const std::string p = block("model.layers", i);
    b.norm(p + ".input_layernorm", h, i, false);
    b.linear(p + ".self_attn.q_proj", c.q_width(), h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.k_proj", c.kv_width(), h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.v_proj", c.kv_width(), h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.o_proj", h, c.q_width(), i, c.attn_out_bias, false);
    b.norm(p + ".post_attention_layernorm", h, i, false);
    b.linear(p + ".mlp.gate_proj", c.intermediate_size, h, i, c.mlp_bias, true);
    b.linear(p + ".mlp.up_proj", c.intermediate_size, h, i, c.mlp_bias, true);
    b.linear(p + ".mlp.down_proj", h, c.intermediate_size, i, c.mlp_bias, false);
  }
  b.norm("model.norm", h, L, false);
  b.head("lm_head.weight", c.vocab_size, h, L, c.tie_word_embeddings, embed);
}

void build_opt(const ModelConfig& c, InventoryBuilder& b) {
  const int64_t h = c.hidden_size;
  const int64_t proj = c.word_embed_proj_dim;
  const int L = static_cast<int>(c.num_layers);
  const int embed = b.add("model.decoder.embed_tokens.weight", {c.vocab_size, proj}, kEmbeddingLayer, TpSplit::vocab);
  if (proj != h) b.add("model.decoder.project_in.weight", {h, proj}, kEmbeddingLayer, TpSplit::replicated, true);
  b.add("model.decoder.embed_positions.weight", {c.max_positions + c.position_offset, h}, kEmbeddingLayer, TpSplit::replicated);
  for (int i = 0; i < L; ++i) {
    const std::string p = block("model.decoder.layers", i);
    b.norm(p + ".self_attn_layer_norm", h, i, true);
    b.linear(p + ".self_attn.q_proj", h, h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.k_proj", h, h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.v_proj", h, h, i, c.qkv_bias, true);
    b.linear(p + ".self_attn.out_proj", h, h, i, c.attn_out_bias, false);
    b.norm(p + ".final_layer_norm", h, i, true);
    b.linear(p + ".fc1", c.intermediate_size, h, i, c.mlp_bias, true);
    b.linear(p + ".fc2", h, c.intermediate_size, i, c.mlp_bias, false);
  }
  if (c.final_norm) b.norm("model.decoder.final_layer_norm", h, L, true);
  if (proj != h) b.add("model.decoder.project_out.weight", {proj, h}, L, TpSplit::replicated, true);
  b.head("lm_head.weight", c.vocab_size, proj, L, c.tie_word_embeddings, embed);
}

void build_bloom(const ModelConfig& c, InventoryBuilder& b) {
  const int64_t h = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const int embed = b.add("transformer.word_embeddings.weight", {c.vocab_size, h}, kEmbeddingLayer, TpSplit::vocab);
  b.norm("transformer.word_embeddings_layernorm", h, kEmbeddingLayer, true);
  for (int i = 0; i < L; ++i) {
    const std::string p = block("transformer.h", i);
    b.norm(p + ".input_layernorm", h, i, true);
    b.linear(p + ".self_attention.query_key_value", 3 * h, h, i, true, true);
    b.linear(p + ".self_attention.dense", h, h, i, true, false);
    b.norm(p + ".post_attention_layernorm", h, i, true);
    b.linear(p + ".mlp.dense_h_to_4h", c.intermediate_size, h, i, true, true);
    b.linear(p + ".mlp.dense_4h_to_h", h, c.intermediate_size, i, true, false);
  }
  b.norm("transformer.ln_f", h, L, true);
  b.head("lm_head.weight", c.vocab_size, h, L, c.tie_word_embeddings, embed);
}

void build_gpt_neox(const ModelConfig& c, InventoryBuilder& b) {
  const int64_t h = c.hidden_size;
  const int L = static_cast<int>(c.num_layers);
  const int embed = b.add("gpt_neox.embed_in.weight", {c.vocab_size, h}, kEmbeddingLayer, TpSplit::vocab);
  for (int i = 0; i < L; ++i) {
    const std::string p = block("gpt_neox.layers", i);
    b.norm(p + ".input_layernorm", h, i, true);
    b.norm(p + ".post_attention_layernorm", h, i, true);
    b.linear(p + ".attention.query_key_value", 3 * h, h, i, c.qkv_bias, true);
    b.linear(p + ".attention.dense", h, h, i, c.attn_out_bias, false);
    b.linear(p + ".mlp.dense_h_to_4h", c.intermediate_size, h, i, true, true);
    b.linear(p + ".mlp.dense_4h_to_h", h, c.intermediate_size, i, true, false);
  }
  b.norm("gpt_neox.final_layer_norm", h, L, true);
  b.head("embed_out.weight", c.vocab_size, h, L, c.tie_word_embeddings, embed);
}

}  // namespace

int64_t TensorInfo::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

int64_t TensorInventory::parameter_count() const {
  int64_t total = 0;
  for (const TensorInfo& t : tensors) {
    if (t.tied_to < 0) total += t.numel();
  }
  return total;
}

int64_t TensorInventory::largest_tensor_numel() const {
  int64_t largest = 0;
  for (const TensorInfo& t : tensors) {
    if (t.tied_to < 0) largest = std::max(largest, t.numel());
  }
  return largest;
}

TensorInventory build_tensor_inventory(const ModelConfig& config) {
  TensorInventory inventory;
  InventoryBuilder builder(inventory);
  switch (config.family) {
    case ModelFamily::gpt2: build_gpt2(config, builder); break;
    case ModelFamily::llama:
    case ModelFamily::mistral:
    case ModelFamily::qwen2: build_llama_like(config, builder); break;
    case ModelFamily::opt: build_opt(config, builder); break;
    case ModelFamily::bloom: build_bloom(config, builder); break;
    case ModelFamily::gpt_neox: build_gpt_neox(config, builder); break;
  }
  inventory.module_order = module_parameter_order(config, inventory);
  return inventory;
}

}  // namespace tessera::planner
