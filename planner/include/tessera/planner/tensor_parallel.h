// One tensor-parallel rank's part of each parameter, after Megatron-LM
// (Shoeybi et al. 2019, §3): column-parallel layers (q, k, v, the MLP's up and
// gate) keep their output features [r · n/tp, (r+1) · n/tp) on rank r,
// row-parallel ones (the attention output, the MLP's down projection) their
// input features; the vocabulary-parallel embedding and head keep rows
// [r · ⌈V/tp⌉, (r+1) · ⌈V/tp⌉), the vocabulary padded up to a multiple of tp
// (Megatron-LM pads it so that it divides, --make-vocab-size-divisible-by);
// norms, position tables and row-parallel biases are whole on every rank.
// The planner's memory model counts these sizes (model.h, ParamTotals::
// per_tp_rank) and the engine allocates them: one rule for both.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/model.h"
#include "tessera/planner/tensor_inventory.h"

namespace tessera::planner {

// Whether `tp` ranks can each hold whole attention heads and key-value heads
// and an equal share of the MLP.
inline bool tp_divides_model(const ModelConfig& c, int64_t tp) {
  return c.num_heads % tp == 0 && c.num_kv_heads % tp == 0 && c.intermediate_size % tp == 0;
}

// The shape of rank r's part (the same on every rank).
std::vector<int64_t> tp_local_shape(const TensorInfo& tensor, int64_t tp);

// The inventory as one tp rank holds it: every tensor with its local shape,
// names, layers and ties unchanged.
TensorInventory tp_rank_inventory(const TensorInventory& full, int64_t tp);
// The model one tp rank holds (its inventory, and totals counted from it):
// what data parallelism shards and the optimizer updates on that rank.
Model tp_rank_model(const Model& full, int64_t tp);

// Which of a part's parameters (its flat order, sharding.h) a rank's
// gradient norm counts: not those whole on every tensor-parallel rank
// (TpSplit::replicated) on ranks other than 0 of the group, and not a last
// pipeline stage's copy of a tied embedding (Megatron-LM's clip_grad_norm_fp32
// skips tensor-parallel duplicates and shared embeddings, param_is_not_shared).
// Summed over the group, each parameter then counts once.
std::vector<bool> counted_in_gradient_norm(const Model& part, int64_t tp_rank);

// For each element of rank `rank`'s part, in the part's row-major order:
// visit(local_index, full_index), full_index being the element's row-major
// index in the whole tensor, or -1 for a padding row past the vocabulary.
// Tensors of one or two dimensions (every tensor the inventory holds).
template <typename Visit>
void for_each_tp_element(const TensorInfo& tensor, int64_t tp, int64_t rank, Visit&& visit) {
  const std::vector<int64_t> local = tp_local_shape(tensor, tp);
  const int64_t rows = local[0], cols = local.size() > 1 ? local[1] : 1;
  const int64_t full_cols = tensor.shape.size() > 1 ? tensor.shape[1] : 1;
  // Where local coordinate j along the split dimension lies in the whole tensor.
  const auto full_coordinate = [&](int64_t j) -> int64_t {
    if (tensor.tp_split == TpSplit::vocab) {
      const int64_t row = rank * rows + j;
      return row < tensor.shape[0] ? row : -1;
    }
    const int64_t part = tensor.shape[static_cast<size_t>(tensor.tp_dim)] / tensor.tp_parts;  // one of the fused parts
    const int64_t mine = part / tp;                                                           // this rank's share of it
    return (j / mine) * part + rank * mine + j % mine;
  };
  const bool whole = tensor.tp_split == TpSplit::replicated || tp == 1;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < cols; ++k) {
      int64_t row = i, col = k;
      if (!whole) (tensor.tp_dim == 0 ? row : col) = full_coordinate(tensor.tp_dim == 0 ? i : k);
      visit(i * cols + k, row < 0 ? int64_t{-1} : row * full_cols + col);
    }
  }
}

}  // namespace tessera::planner
