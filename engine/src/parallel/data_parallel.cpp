#include "tessera/engine/parallel/data_parallel.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {
namespace {

using planner::PluginKind;

int zero_stage_of(const planner::PluginOptions& plugin) {
  return plugin.kind == PluginKind::low_level_zero ? plugin.effective_zero_stage() : 0;
}

}  // namespace

Status check_data_parallel_supported(const planner::PluginOptions& plugin, planner::Precision precision, int64_t params, int64_t dp) {
  if (plugin.kind != PluginKind::torch_ddp && plugin.kind != PluginKind::low_level_zero) {
    return make_error(ErrorCode::unsupported, "--plugin " + std::string(enum_name(plugin.kind)) +
                                                  ": the engine runs torch_ddp and low_level_zero so far; plan with one of them");
  }
  if (plugin.cpu_offload) return make_error(ErrorCode::unsupported, "--cpu-offload: the engine does not offload yet; plan without it");
  if (dp > 1 && precision != planner::Precision::fp32) {
    return make_error(ErrorCode::unsupported, "--precision: the engine reduces fp32 gradients across ranks so far; plan with --precision fp32");
  }
  const int64_t padded = planner::padded_flat_numel(params, dp);
  if (zero_stage_of(plugin) == 2 && dp > 1 && planner::zero_bucket_numel(plugin.reduce_bucket_numel, params, dp) < padded) {
    return make_error(ErrorCode::unsupported, "--reduce-bucket-m: the engine's ZeRO-2 reduces all gradients in one bucket so far; plan with "
                                              "--reduce-bucket-m " + std::to_string((padded + (1 << 20) - 1) >> 20) + " or more, or ZeRO stage 1");
  }
  return Status::success();
}

template <typename T>
DataParallel<T>::DataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, int64_t params)
    : group_(group), plugin_(plugin), zero_stage_(zero_stage_of(plugin)), params_(params), shard_(planner::shard_numel(params, group.size())) {}

template <typename T>
FlatStorage DataParallel<T>::storage() const {
  if (zero_stage_ == 0 || group_.size() == 1) return FlatStorage{};
  return FlatStorage{planner::padded_flat_numel(params_, group_.size()),
                     zero_stage_ == 2 ? MemoryCategory::comm_buffers : MemoryCategory::gradients};
}

template <typename T>
void DataParallel<T>::attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) {
  model_ = &model;
  const int64_t dp = group_.size(), rank = group_.rank();
  if (zero_stage_ == 0) {
    optimizer_.emplace(Optimizer<T>::whole(ledger, model.flat_parameters().data(), model.flat_order(), std::move(decay), options));
    return;
  }
  optimizer_.emplace(ledger, model.flat_parameters().data() + rank * shard_, shard_, planner::shard_pieces(model.flat_order(), dp, rank),
                     std::move(decay), options);
  if (dp == 1) return;
  if (zero_stage_ == 1) {
    bucket_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, planner::zero_bucket_numel(plugin_.reduce_bucket_numel, params_, dp));
  } else {
    gradient_shard_ = Tensor<T>(ledger, MemoryCategory::gradients, shard_);
  }
}

template <typename T>
T* DataParallel<T>::shard_gradients() {
  T* flat = model_->flat_gradients().data();
  if (zero_stage_ == 0 || group_.size() == 1) return flat;
  return zero_stage_ == 2 ? gradient_shard_.data() : flat + group_.rank() * shard_;
}

// Piece k of every rank's shard goes through the bucket: rank r's piece is
// copied to bucket[r · piece, (r+1) · piece), the bucket is reduce-scattered in
// place, and this rank's reduced piece is copied back into its shard.
template <typename T>
Status DataParallel<T>::reduce_stage1() {
  const int64_t dp = group_.size(), rank = group_.rank();
  const int64_t piece = bucket_.numel() / dp;
  T* flat = model_->flat_gradients().data();
  T* bucket = bucket_.data();
  for (int64_t begin = 0; begin < shard_; begin += piece) {
    const int64_t n = std::min(piece, shard_ - begin);
    for (int64_t r = 0; r < dp; ++r) std::copy_n(flat + r * shard_ + begin, n, bucket + r * n);
    if (Status s = group_.reduce_scatter(bucket, bucket + rank * n, static_cast<size_t>(n), comm::DataType::f32, comm::ReduceOp::sum); !s) return s;
    std::copy_n(bucket + rank * n, n, flat + rank * shard_ + begin);
  }
  return Status::success();
}

template <typename T>
Status DataParallel<T>::reduce_gradients() {
  if (group_.size() == 1) return Status::success();
  if constexpr (std::is_same_v<T, float>) {
    T* flat = model_->flat_gradients().data();
    switch (zero_stage_) {
      case 0: {
        // Buckets of bucket_cap_mb from the end of the flat order.
        const int64_t bucket = std::max<int64_t>(1, plugin_.bucket_bytes / static_cast<int64_t>(sizeof(T)));
        for (int64_t end = params_; end > 0; end -= bucket) {
          const int64_t begin = std::max<int64_t>(0, end - bucket);
          if (Status s = group_.all_reduce(flat + begin, flat + begin, static_cast<size_t>(end - begin), comm::DataType::f32, comm::ReduceOp::sum); !s) {
            return s;
          }
        }
        return Status::success();
      }
      case 1: return reduce_stage1();
      default: return group_.reduce_scatter(flat, gradient_shard_.data(), static_cast<size_t>(shard_), comm::DataType::f32, comm::ReduceOp::sum);
    }
  } else {
    return make_error(ErrorCode::unsupported, "the engine reduces fp32 gradients across ranks so far");
  }
}

template <typename T>
Result<std::optional<double>> DataParallel<T>::step(double loss_scale) {
  const bool sharded_over_ranks = zero_stage_ > 0 && group_.size() > 1;
  T* params = sharded_over_ranks ? model_->flat_parameters().data() + group_.rank() * shard_ : model_->flat_parameters().data();
  const T* grads = shard_gradients();
  double sum_of_squares = optimizer_->sum_of_squares(grads, 1.0 / loss_scale);
  if (sharded_over_ranks) {
    if (Status s = group_.all_reduce(&sum_of_squares, &sum_of_squares, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
  }
  const std::optional<double> norm = optimizer_->apply(params, grads, sum_of_squares, loss_scale);
  if (norm && sharded_over_ranks) {
    if constexpr (std::is_same_v<T, float>) {
      T* flat = model_->flat_parameters().data();
      if (Status s = group_.all_gather(params, flat, static_cast<size_t>(shard_), comm::DataType::f32); !s) return s.error();
    }
  }
  return norm;
}

template class DataParallel<float>;
template class DataParallel<bf16>;
template class DataParallel<fp16>;

}  // namespace tessera::engine
