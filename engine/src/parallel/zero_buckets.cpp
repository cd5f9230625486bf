#include "tessera/engine/parallel/zero_buckets.h"

#include <algorithm>
#include <utility>

namespace tessera::engine {

int zero_stage_of(const planner::PluginOptions& plugin) {
  const bool zero = plugin.kind == planner::PluginKind::low_level_zero || plugin.kind == planner::PluginKind::hybrid_parallel;
  return zero ? plugin.effective_zero_stage() : 0;
}

ZeroBuffers zero_buffers(const planner::Model& model, const planner::PluginOptions& plugin, int64_t dp) {
  const int stage = plugin.effective_zero_stage();
  const planner::ZeroReduceBuckets buckets = planner::zero_reduce_buckets(model.inventory, plugin, dp);
  ZeroBuffers b;
  b.parameters = planner::padded_flat_numel(model.parameter_count, dp);
  if (stage == 1) {
    b.full_gradients = b.parameters;
  } else {
    b.gradient_shard = planner::shard_numel(model.parameter_count, dp);
  }
  if (buckets.whole_model) {  // the full gradient buffer is the bucket (DataParallel::storage)
    b.full_gradients = b.parameters;
    b.full_gradients_category = MemoryCategory::comm_buffers;
  } else {
    b.bucket = buckets.numel;
    b.bucket_count = buckets.count;
  }
  return b;
}

std::vector<Zero1Piece> zero1_pieces(int64_t shard_numel, int64_t bucket_numel, int64_t dp) {
  const int64_t piece = bucket_numel / dp;
  std::vector<Zero1Piece> pieces;
  for (int64_t begin = 0; begin < shard_numel; begin += piece) pieces.push_back({begin, std::min(piece, shard_numel - begin)});
  return pieces;
}

Zero2Bucket::Zero2Bucket(const planner::TensorInventory& inventory, std::vector<planner::FlatParameter> order, int64_t bucket_numel, int64_t dp,
                         int64_t rank)
    : order_(std::move(order)),
      layer_parameters_(planner::parameters_by_layer(inventory)),
      numel_(bucket_numel),
      dp_(dp),
      rank_(rank),
      shard_(planner::shard_numel(inventory.parameter_count(), dp)),
      free_(bucket_numel) {}

bool Zero2Bucket::needs_flush(int layer) const {
  int64_t numel = 0;
  for (const int p : layer_parameters_[static_cast<size_t>(layer + 1)]) numel += order_[static_cast<size_t>(p)].numel;
  return numel > free_;
}

std::vector<Zero2Placement> Zero2Bucket::place(int layer) {
  const std::vector<int>& parameters = layer_parameters_[static_cast<size_t>(layer + 1)];
  int64_t numel = 0;
  for (const int p : parameters) numel += order_[static_cast<size_t>(p)].numel;
  free_ -= numel;
  std::vector<Zero2Placement> placed;
  int64_t at = free_;
  for (const int p : parameters) {
    const int64_t n = order_[static_cast<size_t>(p)].numel;
    placed.push_back({p, at, n});
    at += n;
  }
  held_.insert(held_.end(), placed.begin(), placed.end());
  return placed;
}

std::vector<Zero2Run> Zero2Bucket::flush() {
  std::sort(held_.begin(), held_.end(), [](const Zero2Placement& a, const Zero2Placement& b) { return a.bucket_offset < b.bucket_offset; });
  const auto flat_of = [this](const Zero2Placement& h) { return order_[static_cast<size_t>(h.parameter)].offset; };
  std::vector<Zero2Run> runs;
  for (size_t i = 0; i < held_.size();) {
    // The longest run that is one range of both the bucket and the flat order.
    const int64_t flat = flat_of(held_[i]), bucket = held_[i].bucket_offset;
    int64_t numel = held_[i++].numel;
    while (i < held_.size() && flat_of(held_[i]) == flat + numel && held_[i].bucket_offset == bucket + numel) numel += held_[i++].numel;
    // Rank r owns the part of [flat, flat + numel) inside [r · shard, (r + 1) · shard).
    const auto owned_from = [&](int64_t r) { return std::clamp(r * shard_, flat, flat + numel); };
    Zero2Run run;
    run.bucket_offset = bucket;
    for (int64_t r = 0; r < dp_; ++r) run.counts.push_back(static_cast<size_t>(owned_from(r + 1) - owned_from(r)));
    run.mine_in_bucket = bucket + (owned_from(rank_) - flat);
    run.mine_in_shard = owned_from(rank_) - rank_ * shard_;
    run.mine_numel = owned_from(rank_ + 1) - owned_from(rank_);
    runs.push_back(std::move(run));
  }
  held_.clear();
  free_ = numel_;
  return runs;
}

}  // namespace tessera::engine
