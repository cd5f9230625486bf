#include "tessera/engine/parallel/data_parallel.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/engine/elementwise_math.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {
namespace {

using planner::PluginKind;

template <typename T>
constexpr comm::DataType kType = comm::data_type_of<T>();

// hybrid_parallel's data-parallel part is ColossalAI's ZeRO of the same stage
// (HybridParallelPlugin's zero_stage), or DDP at stage 0.
int zero_stage_of(const planner::PluginOptions& plugin) {
  return plugin.kind == PluginKind::low_level_zero || plugin.kind == PluginKind::hybrid_parallel ? plugin.effective_zero_stage() : 0;
}

}  // namespace

template <typename T>
DataParallel<T>::DataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model)
    : ParallelStrategy<T>(group),
      model_description_(model),
      plugin_(plugin),
      zero_stage_(zero_stage_of(plugin)),
      params_(model.parameter_count),
      shard_(planner::shard_numel(params_, group.size())),
      bucketed_(plugin.kind == PluginKind::low_level_zero && zero_stage_ == 2 && group.size() > 1 &&
                planner::zero2_bucket_numel(model.inventory, plugin.reduce_bucket_numel, group.size()) <
                    planner::padded_flat_numel(params_, group.size())) {}

template <typename T>
FlatStorage DataParallel<T>::storage() const {
  if (zero_stage_ == 0 || this->group_.size() == 1) return FlatStorage{};
  return FlatStorage{planner::padded_flat_numel(params_, this->group_.size()),
                     zero_stage_ == 2 ? MemoryCategory::comm_buffers : MemoryCategory::gradients, true, !bucketed_};
}

template <typename T>
Status DataParallel<T>::attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) {
  model_ = &model;
  const int64_t dp = this->group_.size(), rank = this->group_.rank();
  planner::OptimizerLayout layout = planner::optimizer_layout(model_description_, plugin_, dp, rank);
  // ZeRO-Offload (Ren et al. 2021): master weights, states and an fp32 copy of the gradient shard on the host.
  const MemorySpace optimizer_space = plugin_.cpu_offload ? MemorySpace::host : MemorySpace::device;
  T* flat = model.flat_parameters().data();  // null in a dry run
  T* shard = flat == nullptr ? nullptr : flat + (zero_stage_ > 0 ? rank * shard_ : 0);
  optimizer_.emplace(ledger, shard, layout.shard_numel, std::move(layout.pieces), std::move(decay), options, optimizer_space);
  if (plugin_.cpu_offload) host_gradients_ = Tensor<float>(ledger, MemoryCategory::gradients, shard_, MemorySpace::host);
  if (dp == 1) return Status::success();
  if (zero_stage_ == 0) {
    buckets_.emplace(model_description_.inventory, model.flat_order(), params_, plugin_.bucket_bytes, static_cast<int64_t>(sizeof(T)));
    if (!ledger.is_dry_run()) model.set_unit_hooks(this);
    return Status::success();
  }
  if (zero_stage_ == 1) {
    bucket_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, planner::zero_bucket_numel(plugin_.reduce_bucket_numel, params_, dp));
  } else {
    gradient_shard_ = Tensor<T>(ledger, MemoryCategory::gradients, shard_);
  }
  if (bucketed_) {
    const planner::TensorInventory& inventory = model_description_.inventory;
    bucket_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, planner::zero2_bucket_numel(inventory, plugin_.reduce_bucket_numel, dp));
    zero2_bucket_.emplace(inventory, model.flat_order(), bucket_.numel(), dp, rank);
    if (!ledger.is_dry_run()) model.set_unit_hooks(this);
  }
  return Status::success();
}

template <typename T>
T* DataParallel<T>::shard_parameters() {
  return model_->flat_parameters().data() + (sharded() ? this->group_.rank() * shard_ : 0);
}

template <typename T>
T* DataParallel<T>::shard_gradients() {
  T* flat = model_->flat_gradients().data();
  if (zero_stage_ == 0 || this->group_.size() == 1) return flat;
  return zero_stage_ == 2 ? gradient_shard_.data() : flat + this->group_.rank() * shard_;
}

// Each piece of the shards through the bucket (zero_buckets.h, zero1_pieces).
template <typename T>
Status DataParallel<T>::reduce_stage1() {
  const int64_t dp = this->group_.size(), rank = this->group_.rank();
  T* flat = model_->flat_gradients().data();
  T* bucket = bucket_.data();
  for (const Zero1Piece& piece : zero1_pieces(shard_, bucket_.numel(), dp)) {
    const int64_t n = piece.numel;
    for (int64_t r = 0; r < dp; ++r) std::copy_n(flat + r * shard_ + piece.begin, n, bucket + r * n);
    if (Status s = this->group_.reduce_scatter(bucket, bucket + rank * n, static_cast<size_t>(n), kType<T>, comm::ReduceOp::sum); !s) return s;
    std::copy_n(bucket + rank * n, n, flat + rank * shard_ + piece.begin);
  }
  return Status::success();
}

// Starts the buckets backward has completed and not yet started.
template <typename T>
void DataParallel<T>::start_ready_buckets(int layer) {
  T* flat = model_->flat_gradients().data();
  const size_t complete = buckets_->complete_after(layer);
  while (error_.ok() && started_buckets_ < complete) {
    const DdpBucket& b = buckets_->buckets()[started_buckets_++];
    error_ = this->group_.start_all_reduce(flat + b.begin, flat + b.begin, static_cast<size_t>(b.end - b.begin), comm::ReduceOp::sum);
  }
}

// Between layers, MPI gets the chance to move the started buckets along.
template <typename T>
void DataParallel<T>::before_backward(int layer) {
  if (bucketed_) return place_in_bucket(layer);
  if (overlap_this_backward_ && error_.ok()) error_ = this->group_.progress();
}

template <typename T>
void DataParallel<T>::after_backward(int layer) {
  if (bucketed_) {
    if (layer == planner::kEmbeddingLayer) flush_bucket();  // the last layer of backward
    return;
  }
  if (!overlap_this_backward_ || !error_.ok()) return;
  start_ready_buckets(layer);
  if (error_.ok()) error_ = this->group_.progress();
}

// The layer's gradients, placed in the bucket (zero_buckets.h), zeroed and bound to the model.
template <typename T>
void DataParallel<T>::place_in_bucket(int layer) {
  if (zero2_bucket_->needs_flush(layer)) flush_bucket();
  for (const Zero2Placement& placed : zero2_bucket_->place(layer)) {
    T* gradient = bucket_.data() + placed.bucket_offset;
    std::fill(gradient, gradient + placed.numel, T{});
    model_->bind_parameter(placed.parameter, model_->flat_parameters().data() + model_->flat_order()[static_cast<size_t>(placed.parameter)].offset, gradient);
  }
}

// Each run of the bucket to the ranks owning its parts, each adding its part into its gradient shard.
template <typename T>
void DataParallel<T>::flush_bucket() {
  for (const Zero2Run& run : zero2_bucket_->flush()) {
    if (!error_.ok()) break;
    T* mine = bucket_.data() + run.mine_in_bucket;
    error_ = this->group_.reduce_scatter_v(bucket_.data() + run.bucket_offset, mine, run.counts, kType<T>, comm::ReduceOp::sum);
    T* into = gradient_shard_.data() + run.mine_in_shard;
    for (int64_t j = 0; j < run.mine_numel && error_.ok(); ++j) into[j] = narrow<T>(math::residual_sum(widen(into[j]), widen(mine[j])));
  }
}

template <typename T>
Status DataParallel<T>::reduce_gradients() {
  if (this->group_.size() == 1) return Status::success();
  T* flat = model_->flat_gradients().data();
  if (zero_stage_ == 1) return reduce_stage1();
  if (bucketed_) return std::exchange(error_, Status::success());  // every backward reduced its gradients
  if (zero_stage_ == 2) return this->group_.reduce_scatter(flat, gradient_shard_.data(), static_cast<size_t>(shard_), kType<T>, comm::ReduceOp::sum);
  // DDP: backward started the buckets; start any it did not reach, and wait for all.
  start_ready_buckets(planner::kEmbeddingLayer);
  Status finished = this->group_.finish_started();
  started_buckets_ = 0;
  overlap_this_backward_ = false;
  if (!error_.ok()) return std::exchange(error_, Status::success());
  return finished;
}

// Each rank restored its shard of the parameters: gather them as after a step.
template <typename T>
Status DataParallel<T>::weights_restored() {
  if (!sharded()) return Status::success();
  return this->group_.all_gather(shard_parameters(), model_->flat_parameters().data(), static_cast<size_t>(shard_), kType<T>);
}

template <typename T>
Result<std::optional<double>> DataParallel<T>::step(double loss_scale) {
  std::optional<double> norm;
  if (plugin_.cpu_offload) {
    const T* device_gradients = shard_gradients();
    float* host = host_gradients_.data();
    if (host != nullptr) {
      for (int64_t i = 0; i < shard_; ++i) host[i] = widen(device_gradients[i]);
    }
    auto sum_of_squares = this->global_sum_of_squares(*optimizer_, static_cast<const float*>(host), loss_scale, sharded());
    if (!sum_of_squares) return sum_of_squares.error();
    norm = optimizer_->apply(static_cast<const float*>(host), sum_of_squares.value(), loss_scale);
  } else {
    const T* grads = shard_gradients();
    auto sum_of_squares = this->global_sum_of_squares(*optimizer_, grads, loss_scale, sharded());
    if (!sum_of_squares) return sum_of_squares.error();
    norm = optimizer_->apply(grads, sum_of_squares.value(), loss_scale);
  }
  if (norm && sharded()) {
    if (Status s = this->group_.all_gather(shard_parameters(), model_->flat_parameters().data(), static_cast<size_t>(shard_), kType<T>); !s) {
      return s.error();
    }
  }
  return norm;
}

template class DataParallel<float>;
template class DataParallel<bf16>;
template class DataParallel<fp16>;

}  // namespace tessera::engine
