// How data parallelism lays out and splits a model's parameters: one rule for
// the planner's memory model and the engine's buffers, so both count the same
// elements.
//
// The flat order: the unique parameters (a tied tensor once, where it first
// appears) back to back in inventory order. Parameters, gradients, master
// weights and optimizer states are each one flat buffer in this order; a
// tensor is a view at its offset, and buckets and ZeRO shards are ranges.
//
// Sharding over dp ranks: the flat buffer is padded to dp · shard elements,
// shard = ceil(params / dp), and rank r owns [r · shard, (r + 1) · shard)
// (ZeRO's partitioning of the flattened parameters, Rajbhandari et al. 2020
// §5; PyTorch FSDP's FlatParameter is padded and split the same way, Zhao et
// al. 2023 §3.2). The padding lets reduce-scatter and all-gather run on equal
// pieces in place.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/tensor_inventory.h"

namespace tessera::planner {

struct FlatParameter {
  int tensor_index = 0;  // in the inventory
  int64_t offset = 0;    // in the flat buffer
  int64_t numel = 0;
};

// The unique parameters in flat order with their offsets.
std::vector<FlatParameter> flat_parameter_order(const TensorInventory& inventory);

constexpr int64_t shard_numel(int64_t params, int64_t dp) { return (params + dp - 1) / dp; }
constexpr int64_t padded_flat_numel(int64_t params, int64_t dp) { return dp * shard_numel(params, dp); }

// A rank's shard cut along parameter boundaries: the part of parameter
// `parameter` (an index into the flat order) at [offset_in_parameter,
// + numel), found at `offset_in_shard` of the shard. Padding is not a piece.
struct ShardPiece {
  int parameter = 0;
  int64_t offset_in_parameter = 0;
  int64_t offset_in_shard = 0;
  int64_t numel = 0;
};
std::vector<ShardPiece> shard_pieces(const std::vector<FlatParameter>& order, int64_t dp, int64_t rank);

// ZeRO's gradient bucket (ColossalAI LowLevelZeroOptimizer's
// reduce_bucket_size): at most `bucket_numel` elements, a multiple of dp so
// that its reduce-scatter gives each rank an equal piece, and no larger than
// the padded flat buffer.
constexpr int64_t zero_bucket_numel(int64_t bucket_numel, int64_t params, int64_t dp) {
  const int64_t padded = padded_flat_numel(params, dp);
  const int64_t rounded = bucket_numel / dp * dp;
  return rounded <= 0 ? dp : (rounded < padded ? rounded : padded);
}

}  // namespace tessera::planner
