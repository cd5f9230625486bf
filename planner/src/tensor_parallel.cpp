#include "tessera/planner/tensor_parallel.h"

#include "tessera/planner/sharding.h"

namespace tessera::planner {

std::vector<int64_t> tp_local_shape(const TensorInfo& tensor, int64_t tp) {
  std::vector<int64_t> shape = tensor.shape;
  if (tp == 1 || tensor.tp_split == TpSplit::replicated) return shape;
  int64_t& cut = shape[static_cast<size_t>(tensor.tp_dim)];
  cut = tensor.tp_split == TpSplit::vocab ? (cut + tp - 1) / tp : cut / tp;
  return shape;
}

TensorInventory tp_rank_inventory(const TensorInventory& full, int64_t tp) {
  TensorInventory local = full;
  for (TensorInfo& tensor : local.tensors) tensor.shape = tp_local_shape(tensor, tp);
  return local;
}

Model tp_rank_model(const Model& full, int64_t tp) {
  return tp == 1 ? full : make_model(full.config, tp_rank_inventory(full.inventory, tp));
}

std::vector<bool> counted_in_gradient_norm(const Model& part, int64_t tp_rank) {
  std::vector<bool> counted;
  for (const FlatParameter& flat : flat_parameter_order(part.inventory)) {
    const TensorInfo& tensor = part.inventory.tensors[static_cast<size_t>(flat.tensor_index)];
    counted.push_back(!tensor.tied_copy && (tp_rank == 0 || tensor.tp_split != TpSplit::replicated));
  }
  return counted;
}

}  // namespace tessera::planner
