#include "tessera/planner/flops.h"

namespace tessera::planner {
namespace {

// Attention's two batched matmuls, QK^T and AV: 2·s·d each per token.
double attention_core_flops_per_token(const ModelConfig& c, int64_t seq_len) {
  return 4.0 * static_cast<double>(seq_len) * static_cast<double>(c.q_width());
}

}  // namespace

double block_forward_flops_per_token(const Model& model, int layer, int64_t seq_len) {
  double matmul_weights = 0;
  for (const TensorInfo& t : model.inventory.tensors) {
    if (t.layer == layer && t.is_matmul_weight) matmul_weights += static_cast<double>(t.numel());
  }
  return 2.0 * matmul_weights + attention_core_flops_per_token(model.config, seq_len);
}

FlopsPerToken flops_per_token(const Model& model, int64_t seq_len, RecomputeMode recompute) {
  // Every matmul weight outside the blocks (OPT's projections, the head, tied or not).
  double outside_blocks = 0;
  double blocks = 0;
  const int L = static_cast<int>(model.config.num_layers);
  for (const TensorInfo& t : model.inventory.tensors) {
    if (!t.is_matmul_weight) continue;
    (t.layer >= 0 && t.layer < L ? blocks : outside_blocks) += 2.0 * static_cast<double>(t.numel());
  }
  const double attention = static_cast<double>(L) * attention_core_flops_per_token(model.config, seq_len);
  FlopsPerToken f;
  f.forward = blocks + attention + outside_blocks;
  f.backward = 2.0 * f.forward;
  switch (recompute) {
    case RecomputeMode::none: break;
    case RecomputeMode::selective: f.recompute = attention; break;  // only QK^T, softmax, AV (Korthikanti §5)
    case RecomputeMode::full: f.recompute = blocks + attention; break;  // every block's forward again
  }
  return f;
}

}  // namespace tessera::planner
