// Which of a model's unique parameters (flat order, planner/sharding.h) plays
// each role in the transformer's layers, read from the planner's tensor
// inventory by name: one mapping for the CPU model (model/transformer.h) and
// the GPU one (cuda/gpt_training.h).
#pragma once

#include <span>
#include <vector>

#include "tessera/planner/model.h"

namespace tessera::engine {

// Parameter indices of one block (-1 where the family has none).
struct BlockParameters {
  int attn_norm_w = -1, attn_norm_b = -1, mlp_norm_w = -1, mlp_norm_b = -1;
  int qkv_w = -1, qkv_b = -1;                                      // GPT-2's fused c_attn
  int q_w = -1, q_b = -1, k_w = -1, k_b = -1, v_w = -1, v_b = -1;  // Llama's separate projections
  int o_w = -1, o_b = -1;
  int fc_w = -1, fc_b = -1, proj_w = -1, proj_b = -1;              // GPT-2's MLP
  int gate_w = -1, up_w = -1, down_w = -1;                         // SwiGLU
};

struct ParameterSlots {
  std::vector<int> tensor_to_param;  // inventory index -> unique parameter index (a tied tensor: its original's)
  std::vector<BlockParameters> blocks;  // by layer
  int wte = -1, wpe = -1, final_norm_w = -1, final_norm_b = -1, head = -1;
};

// The inventory's tensors, in order, of a model of `num_layers` blocks: a
// tensor that is not tied is the next unique parameter.
ParameterSlots parameter_slots(const planner::TensorInventory& inventory, int num_layers);

// The norms' parameters (every block's two, the final norm's), present ones
// only: under sequence parallelism they see only a rank's tokens, so their
// gradients are summed over the tensor-parallel group once per step
// (model/tensor_parallel.h), by the CPU model and the GPU step alike.
std::vector<int> norm_parameters(std::span<const BlockParameters> blocks, int final_norm_w, int final_norm_b);

}  // namespace tessera::engine
