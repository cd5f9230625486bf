// Parameter roles from the inventory's names; see parameter_slots.h.
#include "tessera/engine/model/parameter_slots.h"

#include <string>

namespace tessera::engine {
namespace {

// The part of a tensor's name after "<blocks>.<layer>.", e.g. "attn.c_attn.weight".
std::string block_suffix(const std::string& name, int layer) {
  const std::string marker = "." + std::to_string(layer) + ".";
  const auto at = name.find(marker);
  return at == std::string::npos ? name : name.substr(at + marker.size());
}

}  // namespace

ParameterSlots parameter_slots(const planner::TensorInventory& inventory, int num_layers) {
  ParameterSlots slots;
  slots.blocks.resize(static_cast<size_t>(num_layers));
  int unique = 0;
  for (const planner::TensorInfo& info : inventory.tensors) {
    const int index = info.tied_to >= 0 ? slots.tensor_to_param[static_cast<size_t>(info.tied_to)] : unique++;
    slots.tensor_to_param.push_back(index);
    if (info.layer == planner::kEmbeddingLayer) {
      (info.name.find("wpe") != std::string::npos ? slots.wpe : slots.wte) = index;
    } else if (info.layer >= num_layers) {
      if (info.is_matmul_weight) slots.head = index;
      else (info.name.ends_with(".bias") ? slots.final_norm_b : slots.final_norm_w) = index;
    } else {
      BlockParameters& layer = slots.blocks[static_cast<size_t>(info.layer)];
      const std::string s = block_suffix(info.name, info.layer);
      struct Slot { const char* suffix; int* target; };
      for (const Slot& slot : {Slot{"ln_1.weight", &layer.attn_norm_w}, Slot{"ln_1.bias", &layer.attn_norm_b}, Slot{"ln_2.weight", &layer.mlp_norm_w},
                               Slot{"ln_2.bias", &layer.mlp_norm_b}, Slot{"attn.c_attn.weight", &layer.qkv_w}, Slot{"attn.c_attn.bias", &layer.qkv_b},
                               Slot{"attn.c_proj.weight", &layer.o_w}, Slot{"attn.c_proj.bias", &layer.o_b}, Slot{"mlp.c_fc.weight", &layer.fc_w},
                               Slot{"mlp.c_fc.bias", &layer.fc_b}, Slot{"mlp.c_proj.weight", &layer.proj_w}, Slot{"mlp.c_proj.bias", &layer.proj_b},
                               Slot{"input_layernorm.weight", &layer.attn_norm_w}, Slot{"post_attention_layernorm.weight", &layer.mlp_norm_w},
                               Slot{"self_attn.q_proj.weight", &layer.q_w}, Slot{"self_attn.q_proj.bias", &layer.q_b},
                               Slot{"self_attn.k_proj.weight", &layer.k_w}, Slot{"self_attn.k_proj.bias", &layer.k_b},
                               Slot{"self_attn.v_proj.weight", &layer.v_w}, Slot{"self_attn.v_proj.bias", &layer.v_b},
                               Slot{"self_attn.o_proj.weight", &layer.o_w}, Slot{"self_attn.o_proj.bias", &layer.o_b},
                               Slot{"mlp.gate_proj.weight", &layer.gate_w}, Slot{"mlp.up_proj.weight", &layer.up_w},
                               Slot{"mlp.down_proj.weight", &layer.down_w}}) {
        if (s == slot.suffix) *slot.target = index;
      }
    }
  }
  return slots;
}

std::vector<int> norm_parameters(std::span<const BlockParameters> blocks, int final_norm_w, int final_norm_b) {
  std::vector<int> norms{final_norm_w, final_norm_b};
  for (const BlockParameters& block : blocks) norms.insert(norms.end(), {block.attn_norm_w, block.attn_norm_b, block.mlp_norm_w, block.mlp_norm_b});
  std::erase(norms, -1);
  return norms;
}

}  // namespace tessera::engine
