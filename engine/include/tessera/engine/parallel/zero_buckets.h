// ZeRO-1/2's gradient reduction as data (low_level_zero, data_parallel.h):
// which ranges of the flat gradients pass through the reduce bucket, in which
// order, and where each rank's reduced part lands. Shared by the CPU engine's
// low_level_zero (parallel/data_parallel.h) and the GPU step's
// (cuda/zero_shards.h), so that both issue the same collectives on the same
// ranges; only the copies and the collectives' buffers differ.
//
// Both build on the planner's shard rule (planner/sharding.h): the flat
// buffer padded to dp shards of shard = ceil(params / dp), rank r owning
// [r · shard, (r + 1) · shard).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/model.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_inventory.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// The ZeRO stage of `plugin`'s data parallelism: low_level_zero's, and
// hybrid_parallel's (ColossalAI's HybridParallelPlugin runs ZeRO of its
// zero_stage over the data-parallel ranks, DDP at stage 0); 0 for the others.
int zero_stage_of(const planner::PluginOptions& plugin);

// The buffers of the model's 16-bit type a rank keeps under ZeRO besides its
// optimizer shard, in elements, by the planner's rule and categories
// (planner/memory_model.cpp, add_zero_states; the buckets are
// planner::zero_reduce_buckets'), which the GPU step and the CPU engine's
// low_level_zero allocate (cuda/zero_shards.h, data_parallel.h): the
// parameters whole, padded to dp shards; stage 1 the full gradients
// (`gradients`) and the reduce buckets (`comm_buffers`); stage 2 the gradient
// shard (`gradients`) and either the full gradient buffer as its bucket or
// two smaller buckets (`comm_buffers`). hybrid_parallel's are one bucket,
// reduced after backward (planner::hybrid_zero_buckets); `model` is then the
// rank's tensor-parallel part.
struct ZeroBuffers {
  int64_t parameters = 0;
  int64_t full_gradients = 0;  // 0: none (stage 2 with smaller buckets)
  MemoryCategory full_gradients_category = MemoryCategory::gradients;
  int64_t gradient_shard = 0;  // stage 2
  int64_t bucket = 0;          // each separate reduce bucket; 0: none (stage 2 with a whole-model bucket)
  int bucket_count = 0;        // 2: reduced while backward goes on (zero_overlap.h)
  int64_t buckets_numel() const { return bucket * bucket_count; }
};
ZeroBuffers zero_buffers(const planner::Model& model, const planner::PluginOptions& plugin, int64_t dp);

// Stage 1: the full gradients are reduced piece by piece through a bucket of
// `bucket_numel` elements (planner::zero_bucket_numel: a multiple of dp). For
// each piece, rank r's part [r · shard + begin, + numel) of the flat
// gradients is copied to bucket[r · numel, (r + 1) · numel), the bucket is
// reduce-scattered in place, and this rank's reduced part, at rank · numel,
// is copied back over its shard's elements.
struct Zero1Piece {
  int64_t begin = 0;  // in each rank's shard
  int64_t numel = 0;
};
std::vector<Zero1Piece> zero1_pieces(int64_t shard_numel, int64_t bucket_numel, int64_t dp);

// Stage 2 with a bucket smaller than the padded model (planner::
// zero2_bucket_numel): the model keeps no gradient buffer. Before each
// layer's backward its gradients are placed in the bucket just below what it
// holds (backward runs the layers from the head down, so the bucket holds one
// range of the flat order, but for a tied weight's alias at the head); when
// they would not fit, and after the embeddings' backward, the bucket is
// flushed: each run of it that is one range of the flat order is
// reduce-scattered to the ranks owning its parts (Communicator::
// reduce_scatter_v), each adding its part into its gradient shard
// (ColossalAI's LowLevelZeroOptimizer flushes its bucket the same way).
struct Zero2Placement {
  int parameter = 0;  // flat-order index
  int64_t bucket_offset = 0;
  int64_t numel = 0;
};

struct Zero2Run {
  int64_t bucket_offset = 0;       // where the run starts in the bucket
  std::vector<size_t> counts;      // each rank's part of the run, in rank order (reduce_scatter_v)
  int64_t mine_in_bucket = 0;      // where this rank's part starts in the bucket
  int64_t mine_in_shard = 0;       // where it is added into this rank's gradient shard
  int64_t mine_numel = 0;
};

class Zero2Bucket {
 public:
  // `order`: the flat order of `inventory`'s parameters; `bucket_numel`:
  // planner::zero2_bucket_numel's (at least the largest layer's gradients).
  Zero2Bucket(const planner::TensorInventory& inventory, std::vector<planner::FlatParameter> order, int64_t bucket_numel, int64_t dp, int64_t rank);

  int64_t numel() const { return numel_; }
  // Whether `layer`'s gradients (index layer + 1 of planner::parameters_by_layer)
  // do not fit below what the bucket holds: flush() first.
  bool needs_flush(int layer) const;
  // Where `layer`'s gradients go in the bucket (each to be zeroed and bound
  // to its parameter), in flat order; the bucket now holds them too.
  std::vector<Zero2Placement> place(int layer);
  // What the bucket holds as runs to reduce-scatter, in bucket order; the bucket is empty after.
  std::vector<Zero2Run> flush();

 private:
  std::vector<planner::FlatParameter> order_;
  std::vector<std::vector<int>> layer_parameters_;  // index layer + 1, a tied alias's too
  int64_t numel_ = 0, dp_ = 1, rank_ = 0, shard_ = 0;
  std::vector<Zero2Placement> held_;  // what the bucket holds now
  int64_t free_ = 0;                  // [0, free_) is free
};

}  // namespace tessera::engine
