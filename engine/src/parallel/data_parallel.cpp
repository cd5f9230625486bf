#include "tessera/engine/parallel/data_parallel.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/parallel/zero_host_memory.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {
namespace {

using planner::PluginKind;

template <typename T>
constexpr comm::DataType kType = comm::data_type_of<T>();

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
                !planner::zero_reduce_buckets(model.inventory, 2, plugin.reduce_bucket_numel, group.size()).whole_model) {}

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
  // The planner's buckets (zero_buffers): hybrid_parallel reduces stage 1
  // through one bucket after backward, stage 2 from the full buffer.
  const ZeroBuffers buffers = zero_buffers(model_description_, plugin_, dp);
  if (buffers.buckets_numel() > 0) bucket_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, buffers.buckets_numel());
  if (zero_stage_ == 2) gradient_shard_ = Tensor<T>(ledger, MemoryCategory::gradients, shard_);
  T* full = zero_stage_ == 1 ? model.flat_gradients().data() : nullptr;
  reduction_memory_ = std::make_unique<HostZeroMemory<T>>(full, gradient_shard_.data(), shard_, dp, rank);
  if (zero_stage_ == 1) {
    zero1_.emplace(this->group_, kType<T>, bucket_.data(), buffers.bucket_count, *reduction_memory_,
                   BackwardCompletion(model_description_.inventory, model.flat_order(), params_), shard_, buffers.bucket);
  }
  if (bucketed_) zero2_.emplace(this->group_, kType<T>, bucket_.data(), *reduction_memory_, model_description_.inventory, model.flat_order(), buffers.bucket);
  // Stage 1 starts its pieces inside the last backward where it has two buckets; bucketed stage 2 works in every backward.
  if ((bucketed_ || buffers.bucket_count == 2) && !ledger.is_dry_run()) model.set_unit_hooks(this);
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
    if (layer == planner::kEmbeddingLayer && error_.ok()) error_ = zero2_->end_backward();  // the last layer of backward
    return;
  }
  if (!overlap_this_backward_ || !error_.ok()) return;
  if (zero1_) {
    error_ = zero1_->after_backward(layer);
    return;
  }
  start_ready_buckets(layer);
  if (error_.ok()) error_ = this->group_.progress();
}

// The layer's gradients, placed in a bucket (zero_overlap.h), zeroed and bound to the model.
template <typename T>
void DataParallel<T>::place_in_bucket(int layer) {
  if (!error_.ok()) return;
  auto bound = zero2_->before_backward(layer);
  if (!bound) {
    error_ = bound.error();
    return;
  }
  for (const BoundGradient& b : bound.value()) {
    model_->bind_parameter(b.parameter, model_->flat_parameters().data() + model_->flat_order()[static_cast<size_t>(b.parameter)].offset,
                           static_cast<T*>(b.gradient));
  }
}

template <typename T>
Status DataParallel<T>::reduce_gradients() {
  if (this->group_.size() == 1) return Status::success();
  T* flat = model_->flat_gradients().data();
  if (zero_stage_ == 1) {
    overlap_this_backward_ = false;
    if (!error_.ok()) return std::exchange(error_, Status::success());
    return zero1_->finish();  // backward may have started some pieces
  }
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
