#include "tessera/planner/sharding.h"

#include <algorithm>

namespace tessera::planner {

std::vector<FlatParameter> flat_parameter_order(const TensorInventory& inventory) {
  std::vector<FlatParameter> order;
  int64_t offset = 0;
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    const TensorInfo& tensor = inventory.tensors[i];
    if (tensor.tied_to >= 0) continue;
    order.push_back({static_cast<int>(i), offset, tensor.numel()});
    offset += tensor.numel();
  }
  return order;
}

std::vector<ShardPiece> shard_pieces(const std::vector<FlatParameter>& order, int64_t dp, int64_t rank) {
  const int64_t params = order.empty() ? 0 : order.back().offset + order.back().numel;
  const int64_t shard = shard_numel(params, dp);
  const int64_t begin = rank * shard, end = begin + shard;
  std::vector<ShardPiece> pieces;
  for (size_t p = 0; p < order.size(); ++p) {
    const int64_t first = std::max(begin, order[p].offset), last = std::min(end, order[p].offset + order[p].numel);
    if (first < last) pieces.push_back({static_cast<int>(p), first - order[p].offset, first - begin, last - first});
  }
  return pieces;
}

}  // namespace tessera::planner
