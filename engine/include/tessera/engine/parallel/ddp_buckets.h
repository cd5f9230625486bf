// PyTorch DDP's gradient buckets over the one flat gradient buffer, and when
// backward completes each, shared by the CPU engine's DDP (data_parallel.h)
// and the GPU step's (cuda/gpt_training.h), so that both reduce the same
// ranges in the same order.
//
// The buckets are ranges of the flat gradients (gradient_as_bucket_view) of
// at most bucket_bytes, cut from the end of the flat order: PyTorch DDP builds
// its buckets in reverse parameter order, the order backward completes them
// (Li et al. 2020, "PyTorch Distributed", §3.2.3). Backward finishes the
// layers from the head down to the embeddings, and the flat order follows the
// inventory, whose layers run from the embeddings to the head; so once a
// layer's backward is done every gradient from that layer's first parameter
// to the end of the flat order is complete, and the buckets lying there can
// be reduced while backward goes on. A tied weight sits with the embeddings,
// whose backward is the last to add to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_inventory.h"

namespace tessera::engine {

// Where backward's complete gradients begin in the flat order: once `layer`
// (a block index, num_layers for the head, planner::kEmbeddingLayer for the
// embeddings) has finished its backward, every gradient from complete_from(layer)
// to the end of the flat order is complete (the reasoning above). Shared by
// DDP's buckets and ZeRO-1's overlapped pieces (zero_overlap.h).
class BackwardCompletion {
 public:
  BackwardCompletion(const planner::TensorInventory& inventory, const std::vector<planner::FlatParameter>& order, int64_t numel);
  // numel for a layer with no parameters of its own (it completes nothing new); 0 after the embeddings.
  int64_t complete_from(int layer) const;

 private:
  std::vector<int64_t> layer_begin_;  // where each layer's parameters start in the flat order (index layer + 1)
  int64_t numel_ = 0;
};

struct DdpBucket {
  int64_t begin = 0, end = 0;  // [begin, end) of the flat gradients
};

class DdpBucketPlan {
 public:
  // `order`: the flat order of `inventory`'s parameters (planner::flat_parameter_order),
  // `numel` elements in all, each of `element_bytes`.
  DdpBucketPlan(const planner::TensorInventory& inventory, const std::vector<planner::FlatParameter>& order, int64_t numel, int64_t bucket_bytes,
                int64_t element_bytes);

  // In the order they are reduced: from the end of the flat order to its start.
  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  // How many buckets, from the first, hold only gradients that are complete
  // once backward has finished `layer` (a block index, num_layers for the
  // head, planner::kEmbeddingLayer for the embeddings: all of them).
  size_t complete_after(int layer) const;

 private:
  BackwardCompletion completion_;
  std::vector<DdpBucket> buckets_;
};

}  // namespace tessera::engine
