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

FsdpLayout fsdp_layout(const TensorInventory& inventory, const std::vector<FlatParameter>& order, int64_t dp) {
  // The final norm and the head sit at layer num_layers (tensor_inventory.h),
  // the largest layer index; everything not in a block is the root's.
  int num_blocks = 0;
  for (const FlatParameter& p : order) num_blocks = std::max(num_blocks, inventory.tensors[static_cast<size_t>(p.tensor_index)].layer);
  FsdpLayout layout;
  layout.units.resize(static_cast<size_t>(num_blocks + 1));
  layout.units[0].unit = kRootUnit;
  for (int b = 0; b < num_blocks; ++b) layout.units[static_cast<size_t>(b + 1)].unit = b;
  for (size_t p = 0; p < order.size(); ++p) {
    const int layer = inventory.tensors[static_cast<size_t>(order[p].tensor_index)].layer;
    ShardedUnit& unit = layout.units[layer == kEmbeddingLayer || layer >= num_blocks ? 0 : static_cast<size_t>(layer + 1)];
    unit.parameters.push_back(static_cast<int>(p));
    unit.numel += order[p].numel;
  }
  for (ShardedUnit& unit : layout.units) {
    unit.shard = shard_numel(unit.numel, dp);
    unit.padded = dp * unit.shard;
    unit.offset_in_shard = layout.shard_numel;
    layout.shard_numel += unit.shard;
    layout.padded_total += unit.padded;
    if (unit.unit == kRootUnit) {
      layout.root_padded = unit.padded;
    } else {
      layout.largest_block_padded = std::max(layout.largest_block_padded, unit.padded);
    }
  }
  return layout;
}

std::vector<ShardPiece> fsdp_pieces(const FsdpLayout& layout, const std::vector<FlatParameter>& order, int64_t rank) {
  std::vector<ShardPiece> pieces;
  for (const ShardedUnit& unit : layout.units) {
    const int64_t begin = rank * unit.shard, end = begin + unit.shard;  // in the unit's flat buffer
    int64_t offset = 0;                                                 // of the parameter in the unit's buffer
    for (int p : unit.parameters) {
      const int64_t numel = order[static_cast<size_t>(p)].numel;
      const int64_t first = std::max(begin, offset), last = std::min(end, offset + numel);
      if (first < last) pieces.push_back({p, first - offset, unit.offset_in_shard + first - begin, last - first});
      offset += numel;
    }
  }
  return pieces;
}

std::vector<std::vector<int>> parameters_by_layer(const TensorInventory& inventory) {
  const std::vector<FlatParameter> order = flat_parameter_order(inventory);
  std::vector<int> parameter_of(inventory.tensors.size(), -1);  // inventory tensor -> flat-order index
  for (size_t p = 0; p < order.size(); ++p) parameter_of[static_cast<size_t>(order[p].tensor_index)] = static_cast<int>(p);
  int max_layer = 0;
  for (const TensorInfo& t : inventory.tensors) max_layer = std::max(max_layer, t.layer);
  std::vector<std::vector<int>> out(static_cast<size_t>(max_layer) + 2);
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    const TensorInfo& t = inventory.tensors[i];
    out[static_cast<size_t>(t.layer + 1)].push_back(parameter_of[t.tied_to >= 0 ? static_cast<size_t>(t.tied_to) : i]);
  }
  for (std::vector<int>& parameters : out) std::sort(parameters.begin(), parameters.end());
  return out;
}

std::vector<int64_t> gradient_numel_by_layer(const TensorInventory& inventory) {
  const std::vector<FlatParameter> order = flat_parameter_order(inventory);
  std::vector<int64_t> numel;
  for (const std::vector<int>& parameters : parameters_by_layer(inventory)) {
    numel.push_back(0);
    for (const int p : parameters) numel.back() += order[static_cast<size_t>(p)].numel;
  }
  return numel;
}

int64_t zero2_bucket_numel(const TensorInventory& inventory, int64_t bucket_numel, int64_t dp) {
  const int64_t params = inventory.parameter_count();
  const int64_t bucket = zero_bucket_numel(bucket_numel, params, dp);
  if (bucket >= padded_flat_numel(params, dp)) return bucket;
  const std::vector<int64_t> layers = gradient_numel_by_layer(inventory);
  return std::max(bucket, *std::max_element(layers.begin(), layers.end()));
}

ZeroReduceBuckets zero_reduce_buckets(const TensorInventory& inventory, int stage, int64_t bucket_numel, int64_t dp) {
  const int64_t params = inventory.parameter_count();
  ZeroReduceBuckets b;
  if (stage == 1) {
    b.numel = zero_bucket_numel(bucket_numel, params, dp);
    b.count = b.numel / dp < shard_numel(params, dp) ? 2 : 1;
    return b;
  }
  b.numel = zero2_bucket_numel(inventory, bucket_numel, dp);
  b.whole_model = b.numel >= padded_flat_numel(params, dp);
  b.count = b.whole_model ? 1 : 2;
  return b;
}

ZeroReduceBuckets hybrid_zero_buckets(int64_t params, int stage, int64_t bucket_numel, int64_t dp) {
  ZeroReduceBuckets b;
  b.numel = zero_bucket_numel(bucket_numel, params, dp);
  b.whole_model = stage == 2 && b.numel >= padded_flat_numel(params, dp);
  return b;
}

ZeroReduceBuckets zero_reduce_buckets(const TensorInventory& inventory, const PluginOptions& plugin, int64_t dp) {
  const int stage = plugin.effective_zero_stage();
  if (plugin.kind == PluginKind::hybrid_parallel) return hybrid_zero_buckets(inventory.parameter_count(), stage, plugin.reduce_bucket_numel, dp);
  return zero_reduce_buckets(inventory, stage, plugin.reduce_bucket_numel, dp);
}

}  // namespace tessera::planner
