// Registration orders read from the transformers classes' __init__
// (transformers 4.51; unchanged in its later versions):
//  - LlamaDecoderLayer (and Mistral's, Qwen2's): self_attn (q_proj, k_proj,
//    v_proj, o_proj), mlp (gate_proj, up_proj, down_proj), input_layernorm,
//    post_attention_layernorm; LlamaModel: embed_tokens, layers, norm.
//  - OPTDecoder: embed_tokens, embed_positions, project_out, project_in,
//    final_layer_norm, then layers; OPTDecoderLayer: self_attn (k_proj, v_proj,
//    q_proj, out_proj), self_attn_layer_norm, fc1, fc2, final_layer_norm.
// A weight comes before its bias (torch.nn.Linear, LayerNorm).
#include "tessera/planner/module_order.h"

#include <algorithm>
#include <string>
#include <tuple>

namespace tessera::planner {
namespace {

struct Registration {
  std::vector<std::string> before_blocks;  // top-level modules registered before the layers
  std::vector<std::string> in_block;       // a block's modules, in registration order
};

Registration registration_of(ModelFamily family) {
  switch (family) {
    case ModelFamily::llama:
    case ModelFamily::mistral:
    case ModelFamily::qwen2:
      return {{".embed_tokens."},
              {".self_attn.q_proj.", ".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.o_proj.", ".mlp.gate_proj.", ".mlp.up_proj.",
               ".mlp.down_proj.", ".input_layernorm.", ".post_attention_layernorm."}};
    case ModelFamily::opt:
      return {{".embed_tokens.", ".embed_positions.", ".project_out.", ".project_in.", ".final_layer_norm."},
              {".self_attn.k_proj.", ".self_attn.v_proj.", ".self_attn.q_proj.", ".self_attn.out_proj.", ".self_attn_layer_norm.", ".fc1.",
               ".fc2.", ".final_layer_norm."}};
    case ModelFamily::gpt2:
    case ModelFamily::bloom:
    case ModelFamily::gpt_neox: break;
  }
  return {};
}

// Position of the first fragment contained in name, or the list's size.
size_t position_in(const std::vector<std::string>& fragments, const std::string& name) {
  for (size_t i = 0; i < fragments.size(); ++i) {
    if (name.find(fragments[i]) != std::string::npos) return i;
  }
  return fragments.size();
}

}  // namespace

std::vector<int> module_parameter_order(const ModelConfig& config, const TensorInventory& inventory) {
  std::vector<int> order;
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    if (inventory.tensors[i].tied_to < 0) order.push_back(static_cast<int>(i));
  }
  const Registration r = registration_of(config.family);
  if (r.in_block.empty()) return order;
  const int blocks = static_cast<int>(config.num_layers);
  // (section, block, position): section 0 before the blocks, 1 the blocks, 2 after them.
  const auto key = [&](int index) {
    const TensorInfo& t = inventory.tensors[static_cast<size_t>(index)];
    if (t.layer >= 0 && t.layer < blocks) return std::tuple{1, t.layer, position_in(r.in_block, t.name)};
    const size_t before = position_in(r.before_blocks, t.name);
    return before < r.before_blocks.size() ? std::tuple{0, 0, before} : std::tuple{2, 0, size_t{0}};
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

}  // namespace tessera::planner
