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
#include "tessera/planner/training_config.h"

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

// Every layer's parameters (index layer + 1, kEmbeddingLayer to the head) as
// indices into the flat order, ascending; a tied weight also where its alias
// is (the head writes that gradient too).
std::vector<std::vector<int>> parameters_by_layer(const TensorInventory& inventory);
// Their gradients' elements, layer by layer.
std::vector<int64_t> gradient_numel_by_layer(const TensorInventory& inventory);

// ZeRO-2's bucket on one stage (low_level_zero). When the plan's bucket
// covers the padded flat buffer, that buffer is the bucket and is reduced
// once a step. A smaller one is filled during backward a layer at a time and
// reduce-scattered when the next layer's gradients would not fit (ColossalAI
// LowLevelZeroOptimizer flushes its bucket the same way, parameter by
// parameter); working a layer at a time, it holds at least the largest
// layer's gradients.
int64_t zero2_bucket_numel(const TensorInventory& inventory, int64_t bucket_numel, int64_t dp);

// low_level_zero's reduce buckets as both engines keep them
// (parallel/zero_buckets.h, zero_buffers) and the memory model books them
// (comm_buffers): `count` buckets of `numel` elements. The engines reduce
// them while backward goes on, as ColossalAI's LowLevelZeroPlugin does by
// default (overlap_communication=True) and DeepSpeed's ZeRO-1/2 with
// overlap_comm: while one bucket's reduce-scatter runs, the next layers'
// gradients go to a second one. DeepSpeed allocates the second buffer for
// just that ("Use double buffers to avoid data access conflict when
// overlap_comm is enabled": deepspeed/runtime/zero/stage_1_and_2.py,
// setup_buckets, at edaa722); ColossalAI keeps each bucket's flattened
// gradients alive on its communication stream (record_stream) while the next
// bucket fills (colossalai/zero/low_level/low_level_optim.py, _run_reduction,
// at 4f9953b). So a second bucket is kept wherever a backward reduces more
// than one bucket:
//  - stage 1: zero_bucket_numel; two when each rank's shard takes more than
//    one piece of bucket / dp elements (one piece is reduced after backward);
//  - stage 2: zero2_bucket_numel; as large as the padded model, one: the full
//    gradient buffer is the bucket, reduced once after backward
//    (`whole_model`); smaller, two.
struct ZeroReduceBuckets {
  int64_t numel = 0;
  int count = 1;
  bool whole_model = false;
  bool overlapped() const { return count == 2; }
  int64_t total_numel() const { return numel * count; }
};
ZeroReduceBuckets zero_reduce_buckets(const TensorInventory& inventory, int stage, int64_t bucket_numel, int64_t dp);

// hybrid_parallel's reduce bucket at ZeRO stage 1 or 2 over a rank's
// `params` (its tensor-parallel part of its stage) on dp ranks, as Tessera's
// engines run it: one bucket of zero_bucket_numel, reduced after the step's
// last backward (its sequence-parallel norm gradients are complete only
// then, and on GPUs no data-parallel collective may run while the
// tensor-parallel ones do: engine/src/cuda/gpt_training_reductions.cpp,
// buckets_overlap_backward); at stage 2 it is the full gradient buffer
// (`whole_model`) where it covers the padded model (the engines refuse a smaller one).
ZeroReduceBuckets hybrid_zero_buckets(int64_t params, int stage, int64_t bucket_numel, int64_t dp);
// The reduce buckets of `plugin`'s ZeRO (low_level_zero, or hybrid_parallel
// at stage 1 or 2) for `inventory` (a rank's part) on dp ranks.
ZeroReduceBuckets zero_reduce_buckets(const TensorInventory& inventory, const PluginOptions& plugin, int64_t dp);

// PyTorch FSDP's units as Tessera wraps a model (each transformer block, and
// the root: the embeddings, the final norm and the head): every unit is a
// FlatParameter of its own, padded to a multiple of dp and sharded over the
// ranks (Zhao et al. 2023, "PyTorch FSDP", §3.2 and §4.1). A rank stores its
// shards of all units back to back, the root's first.
inline constexpr int kRootUnit = -1;

struct ShardedUnit {
  int unit = kRootUnit;         // kRootUnit or a block index
  std::vector<int> parameters;  // indices into the flat order, in flat order
  int64_t numel = 0;            // unpadded
  int64_t shard = 0;            // ceil(numel / dp): this unit's elements on each rank
  int64_t padded = 0;           // dp · shard: the unit gathered
  int64_t offset_in_shard = 0;  // where its shard starts in a rank's storage
};

struct FsdpLayout {
  std::vector<ShardedUnit> units;  // the root, then the blocks in order
  int64_t shard_numel = 0;         // a rank's storage: every unit's shard
  int64_t root_padded = 0;
  int64_t largest_block_padded = 0;
  int64_t padded_total = 0;        // every unit gathered
};

FsdpLayout fsdp_layout(const TensorInventory& inventory, const std::vector<FlatParameter>& order, int64_t dp);
// The rank's storage cut along parameter boundaries (padding is not a piece).
std::vector<ShardPiece> fsdp_pieces(const FsdpLayout& layout, const std::vector<FlatParameter>& order, int64_t rank);

}  // namespace tessera::planner
