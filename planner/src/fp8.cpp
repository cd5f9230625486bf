#include "tessera/planner/fp8.h"

#include <array>

namespace tessera::planner {

int64_t fp8_weight_elements(const Model& model, std::span<const StageLayers> chunks, int64_t tp) {
  int64_t elements = 0;
  for (const StageLayers& chunk : chunks) {
    for (int i = 0; i < chunk.num_layers; ++i) {
      // A block's GEMM weights are all column- or row-parallel (divided over tp).
      elements += model.blocks[static_cast<size_t>(chunk.first_layer + i)].matmul_weights / tp;
    }
  }
  return elements;
}

int64_t fp8_state_bytes(const Model& model, std::span<const StageLayers> chunks, int64_t tp, bool fp8_param_gather) {
  int64_t blocks = 0;
  for (const StageLayers& chunk : chunks) blocks += chunk.num_layers;
  const int64_t weight_copies = fp8_param_gather ? 0 : 2 * fp8_weight_elements(model, chunks, tp);
  return weight_copies + blocks * fp8_scaling_bytes_per_block();
}

Fp8Casts fp8_cast_elements_per_token(const ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const int64_t fc1_out = (c.mlp == MlpKind::swiglu ? 2 : 1) * c.intermediate_size;
  return Fp8Casts{h + c.q_width() + h + c.intermediate_size, c.q_width() + 2 * c.kv_width() + h + fc1_out + h};
}

bool saved_in_fp8(std::string_view term_name) {
  // The inputs of the qkv, output-projection, fc1 and fc2 GEMMs (Korthikanti's names).
  constexpr std::array<std::string_view, 4> gemm_inputs = {"qkv_input", "attn_proj_input", "mlp_input", "activation_output"};
  for (std::string_view name : gemm_inputs) {
    if (name == term_name) return true;
  }
  return false;
}

}  // namespace tessera::planner
