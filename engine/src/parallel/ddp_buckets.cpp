#include "tessera/engine/parallel/ddp_buckets.h"

#include <algorithm>

#include "tessera/planner/rank_order_reduction.h"

namespace tessera::engine {

BackwardCompletion::BackwardCompletion(const planner::TensorInventory& inventory, const std::vector<planner::FlatParameter>& order, int64_t numel)
    : numel_(numel) {
  int layers = 0;
  for (const planner::TensorInfo& tensor : inventory.tensors) layers = std::max(layers, tensor.layer);
  layer_begin_.assign(static_cast<size_t>(layers + 2), numel);
  for (const planner::FlatParameter& p : order) {
    const int layer = inventory.tensors[static_cast<size_t>(p.tensor_index)].layer;
    int64_t& begin = layer_begin_[static_cast<size_t>(layer + 1)];
    begin = std::min(begin, p.offset);
  }
}

int64_t BackwardCompletion::complete_from(int layer) const {
  if (layer == planner::kEmbeddingLayer) return 0;  // the last layer of backward
  const auto slot = static_cast<size_t>(layer + 1);
  return slot < layer_begin_.size() ? layer_begin_[slot] : numel_;
}

DdpBucketPlan::DdpBucketPlan(const planner::TensorInventory& inventory, const std::vector<planner::FlatParameter>& order, int64_t numel,
                             int64_t bucket_bytes, int64_t element_bytes)
    : completion_(inventory, order, numel) {
  const int64_t bucket = planner::ddp_bucket_numel(bucket_bytes, element_bytes);
  for (int64_t end = numel; end > 0; end -= bucket) buckets_.push_back(DdpBucket{std::max<int64_t>(0, end - bucket), end});
}

size_t DdpBucketPlan::complete_after(int layer) const {
  const int64_t complete_from = completion_.complete_from(layer);
  size_t complete = 0;
  while (complete < buckets_.size() && buckets_[complete].begin >= complete_from) ++complete;
  return complete;
}

}  // namespace tessera::engine
