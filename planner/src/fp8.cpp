#include "tessera/planner/fp8.h"

#include <array>

namespace tessera::planner {

int64_t fp8_weight_cache_bytes(const ParamTotals& block, int64_t tp) {
  // A block's GEMM weights are all column- or row-parallel (divided over tp);
  // one byte for the FP8 copy and one for its transpose.
  return 2 * (block.matmul_weights / tp);
}

int64_t fp8_state_bytes(const Model& model, std::span<const StageLayers> chunks, int64_t tp) {
  int64_t bytes = 0;
  for (const StageLayers& chunk : chunks) {
    for (int i = 0; i < chunk.num_layers; ++i) {
      bytes += fp8_weight_cache_bytes(model.blocks[static_cast<size_t>(chunk.first_layer + i)], tp) + fp8_scaling_bytes_per_block();
    }
  }
  return bytes;
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
