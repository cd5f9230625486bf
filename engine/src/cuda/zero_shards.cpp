// ZeRO-1/2 on the GPU step's device buffers; see zero_shards.h.
#include "zero_shards.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <utility>

#include "tessera/engine/adamw_step.h"
#include "tessera/engine/cuda/adamw.h"
#include "tessera/engine/cuda/residual.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

#include "cuda_errors.h"
#include "device_adamw_step.h"
#include "global_sum_of_squares.h"

namespace tessera::engine::cuda {
namespace {

constexpr int64_t kParameterBytes = sizeof(bf16);  // parameters and gradients
constexpr int64_t kStateBytes = sizeof(float);     // master weights and AdamW's states

size_t bytes(int64_t numel, int64_t element_bytes) { return static_cast<size_t>(numel * element_bytes); }

// The reduction's memory operations (zero_overlap.h) on the device, queued on
// the compute stream (the legacy default stream) as the CPU engine's host
// loops (zero_host_memory.h) do them element for element. A started
// reduce-scatter waits for the work queued there before it (comm/nccl.h), and
// what reads its result is queued after the host has seen it finish.
class DeviceZeroMemory final : public ZeroReductionMemory {
 public:
  DeviceZeroMemory(bf16* full_gradients, bf16* gradient_shard, int64_t shard_numel, int64_t dp, int64_t rank)
      : full_(full_gradients), shard_(gradient_shard), shard_numel_(shard_numel), dp_(dp), rank_(rank) {
    int device = 0, max_pitch = 0;
    if (cudaGetDevice(&device) == cudaSuccess && cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, device) == cudaSuccess) {
      pitched_ = bytes(shard_numel_, kParameterBytes) <= static_cast<size_t>(max_pitch);
    }
    cudaGetLastError();  // a failed query is not sticky: the copies go row by row
  }

  Status zero(void* at, int64_t numel) override {
    return succeeded(cudaMemsetAsync(at, 0, bytes(numel, kParameterBytes), nullptr), "zeroing a layer's gradients in the bucket");
  }
  Status add_into_shard(int64_t offset, const void* reduced, int64_t numel) override {
    return succeeded(residual_add(shard_ + offset, static_cast<const bf16*>(reduced), numel, nullptr), "adding into the gradient shard");
  }
  // Rank r's part of every shard to bucket[r · n, (r + 1) · n): dp rows of
  // n elements, one strided copy where the shard's bytes (the source pitch)
  // are within the device's maximum pitch (cudaMemcpy2DAsync fails beyond it,
  // CUDA Runtime API: 2^31 − 1 bytes on current GPUs, a shard of 2^30 bf16
  // elements, e.g. a 7B model's at dp 4), else one copy per rank.
  Status gather_piece(void* bucket, int64_t begin, int64_t numel) override {
    const size_t row = bytes(numel, kParameterBytes);
    if (pitched_) {
      return succeeded(cudaMemcpy2DAsync(bucket, row, full_ + begin, bytes(shard_numel_, kParameterBytes), row, static_cast<size_t>(dp_),
                                         cudaMemcpyDeviceToDevice, nullptr),
                       "copying the shards' pieces into the bucket");
    }
    for (int64_t r = 0; r < dp_; ++r) {
      if (Status s = succeeded(cudaMemcpyAsync(static_cast<bf16*>(bucket) + r * numel, full_ + r * shard_numel_ + begin, row, cudaMemcpyDeviceToDevice, nullptr),
                               "copying a shard's piece into the bucket");
          !s) {
        return s;
      }
    }
    return Status::success();
  }
  Status scatter_piece(const void* reduced, int64_t begin, int64_t numel) override {
    return succeeded(cudaMemcpyAsync(full_ + rank_ * shard_numel_ + begin, reduced, bytes(numel, kParameterBytes), cudaMemcpyDeviceToDevice, nullptr),
                     "copying the reduced piece into the shard");
  }

 private:
  bf16* full_;
  bf16* shard_;
  int64_t shard_numel_, dp_, rank_;
  bool pitched_ = false;  // gather_piece's strided copy is allowed
};

}  // namespace

ZeroShards::ZeroShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator& group, const planner::Model& model,
                       const planner::PluginOptions& plugin, std::vector<bool> decay, const OptimizerOptions& options, bf16* params,
                       comm::Communicator* tensor_group, comm::Communicator* pipeline_group)
    : group_(group),
      tensor_group_(tensor_group),
      pipeline_group_(pipeline_group),
      layout_(planner::optimizer_layout(model, plugin, group.size(), group.rank())),
      norm_runs_(gradient_norm_runs(model, tensor_group != nullptr ? tensor_group->rank() : 0, layout_.pieces)),
      decay_(std::move(decay)),
      options_(options),
      stage_(plugin.effective_zero_stage()),
      shard_(layout_.shard_numel),
      padded_(planner::padded_flat_numel(model.parameter_count, group.size())),
      params_(params) {
  if (plugin.cpu_offload) {
    offloaded_ = std::make_unique<OffloadedShard>(ledger, layout_, decay_, options_,
                                                  planner::counted_in_gradient_norm(model, tensor_group != nullptr ? tensor_group->rank() : 0));
  } else {
    master_ = DeviceBlock(allocator, shard_ * kStateBytes, MemoryCategory::master_weights);
    exp_avg_ = DeviceBlock(allocator, shard_ * kStateBytes, MemoryCategory::optimizer_states);
    exp_avg_sq_ = DeviceBlock(allocator, shard_ * kStateBytes, MemoryCategory::optimizer_states);
  }
  const ZeroBuffers buffers = zero_buffers(model, plugin, group.size());
  if (buffers.full_gradients > 0) full_gradients_ = DeviceBlock(allocator, buffers.full_gradients * kParameterBytes, buffers.full_gradients_category);
  if (buffers.gradient_shard > 0) gradient_shard_ = DeviceBlock(allocator, buffers.gradient_shard * kParameterBytes, MemoryCategory::gradients);
  if (buffers.buckets_numel() > 0) bucket_ = DeviceBlock(allocator, buffers.buckets_numel() * kParameterBytes, MemoryCategory::comm_buffers);
  reduction_memory_ = std::make_unique<DeviceZeroMemory>(full_gradients(), gradient_shard_.as<bf16>(), shard_, group.size(), group.rank());
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  if (stage_ == 1) {
    overlapped_ = buffers.bucket_count == 2;
    zero1_.emplace(group, comm::DataType::bf16, bucket_.as<void>(), buffers.bucket_count, *reduction_memory_,
                   BackwardCompletion(model.inventory, order, model.parameter_count), shard_, buffers.bucket);
  } else if (buffers.bucket_count == 2) {  // no full buffer: the buckets are filled a layer at a time
    zero2_.emplace(group, comm::DataType::bf16, bucket_.as<void>(), *reduction_memory_, model.inventory, order, buffers.bucket);
  }
}

bf16* ZeroShards::shard_parameters() const { return params_ + group_.rank() * shard_; }

bf16* ZeroShards::shard_gradients() const {
  return stage_ == 1 ? full_gradients_.as<bf16>() + group_.rank() * shard_ : gradient_shard_.as<bf16>();
}

Status ZeroShards::start_from(const std::vector<float>& weights) {
  // The shard's part of the flat weights; the padding past the last parameter is 0.
  std::vector<float> shard(static_cast<size_t>(shard_), 0.0f);
  const int64_t first = group_.rank() * shard_;
  for (int64_t i = 0; i < shard_ && first + i < static_cast<int64_t>(weights.size()); ++i) shard[static_cast<size_t>(i)] = weights[static_cast<size_t>(first + i)];
  if (offloaded_) {
    offloaded_->start_from(shard);
    return Status::success();
  }
  if (Status s = succeeded(cudaMemcpy(master_.as<float>(), shard.data(), bytes(shard_, kStateBytes), cudaMemcpyHostToDevice), "copying the master weights' shard");
      !s) {
    return s;
  }
  if (Status s = succeeded(cudaMemset(exp_avg_.as<void>(), 0, bytes(shard_, kStateBytes)), "zeroing AdamW's exp_avg"); !s) return s;
  return succeeded(cudaMemset(exp_avg_sq_.as<void>(), 0, bytes(shard_, kStateBytes)), "zeroing AdamW's exp_avg_sq");
}

Status ZeroShards::zero_gradients() {
  if (full_gradients() != nullptr) {
    if (Status s = succeeded(cudaMemsetAsync(full_gradients(), 0, bytes(padded_, kParameterBytes), nullptr), "zeroing the gradients"); !s) return s;
  }
  if (stage_ == 1) return Status::success();
  return succeeded(cudaMemsetAsync(gradient_shard_.as<void>(), 0, bytes(shard_, kParameterBytes), nullptr), "zeroing the gradient shard");
}

Status ZeroShards::before_backward(int layer, std::vector<bf16*>& gradient_of) {
  if (!zero2_) return Status::success();
  auto bound = zero2_->before_backward(layer);
  if (!bound) return bound.error();
  for (const BoundGradient& b : bound.value()) gradient_of[static_cast<size_t>(b.parameter)] = static_cast<bf16*>(b.gradient);
  return Status::success();
}

Status ZeroShards::after_backward(int layer, bool last_backward) {
  if (zero2_ && layer == planner::kEmbeddingLayer) return zero2_->end_backward();  // the last layer of backward
  if (overlapped_ && last_backward) return zero1_->after_backward(layer);
  return Status::success();
}

Status ZeroShards::reduce() {
  if (zero2_) return Status::success();  // every backward reduced its gradients
  if (stage_ == 2) return group_.reduce_scatter(full_gradients(), gradient_shard_.as<void>(), static_cast<size_t>(shard_), comm::DataType::bf16, comm::ReduceOp::sum);
  return zero1_->finish();  // the last backward may have started some pieces
}

Result<std::optional<double>> ZeroShards::step(void* sum_workspace, double* device_sum) {
  const bf16* grads = shard_gradients();
  bf16* params = shard_parameters();
  if (offloaded_) {
    auto norm = offloaded_->step(grads, params, {&group_, tensor_group_, pipeline_group_}, device_sum);
    if (!norm || !norm->has_value()) return norm;
    if (Status s = group_.all_gather(params, params_, static_cast<size_t>(shard_), comm::DataType::bf16); !s) return s.error();
    return norm;
  }
  auto sum = global_sum_of_squares(grads, norm_runs_, device_sum, sum_workspace, {&group_, tensor_group_, pipeline_group_});
  if (!sum) return sum.error();
  const std::optional<DeviceAdamWStep> begun = begin_adamw_step(sum.value(), steps_, options_);
  if (!begun) return std::optional<double>();
  const AdamWScalars& scalars = begun->scalars;
  for (const planner::ShardPiece& piece : layout_.pieces) {
    const int64_t at = piece.offset_in_shard;
    const float wd = decay_[static_cast<size_t>(piece.parameter)] ? static_cast<float>(options_.weight_decay) : 0.0f;
    if (Status s = succeeded(adamw(params + at, master_.as<float>() + at, exp_avg_.as<float>() + at, exp_avg_sq_.as<float>() + at, grads + at, piece.numel, wd,
                                   scalars, nullptr),
                             "adamw");
        !s) {
      return s.error();
    }
  }
  if (Status s = group_.all_gather(params, params_, static_cast<size_t>(shard_), comm::DataType::bf16); !s) return s.error();
  return std::optional<double>(begun->norm);
}

Status ZeroShards::save(FlatAdamWState& state) {
  if (offloaded_) return offloaded_->save(state);
  if (state.numel() != shard_) return make_error(ErrorCode::invalid_argument, "a ZeRO checkpoint needs a host state of this rank's shard (optimizer_layout)");
  const size_t n = bytes(shard_, kStateBytes);
  if (Status s = succeeded(cudaMemcpy(state.weights(), master_.as<float>(), n, cudaMemcpyDeviceToHost), "copying the master weights' shard"); !s) return s;
  if (Status s = succeeded(cudaMemcpy(state.state(0), exp_avg_.as<float>(), n, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg"); !s) return s;
  if (Status s = succeeded(cudaMemcpy(state.state(1), exp_avg_sq_.as<float>(), n, cudaMemcpyDeviceToHost), "copying AdamW's exp_avg_sq"); !s) return s;
  state.set_steps_taken(steps_);
  return Status::success();
}

// As the CPU engine restores a shard: the weights rounded into the shard's
// parameters (Optimizer::round_into), then gathered (DataParallel::weights_restored).
Status ZeroShards::restore(FlatAdamWState& state) {
  if (offloaded_) {
    if (Status s = offloaded_->restore(state, shard_parameters()); !s) return s;
    return group_.all_gather(shard_parameters(), params_, static_cast<size_t>(shard_), comm::DataType::bf16);
  }
  if (state.numel() != shard_) return make_error(ErrorCode::invalid_argument, "a ZeRO checkpoint needs a host state of this rank's shard (optimizer_layout)");
  const size_t n = bytes(shard_, kStateBytes);
  std::vector<bf16> rounded(static_cast<size_t>(shard_));
  for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = narrow<bf16>(state.weights()[i]);
  if (Status s = succeeded(cudaMemcpy(master_.as<float>(), state.weights(), n, cudaMemcpyHostToDevice), "copying the master weights' shard"); !s) return s;
  if (Status s = succeeded(cudaMemcpy(exp_avg_.as<float>(), state.state(0), n, cudaMemcpyHostToDevice), "copying AdamW's exp_avg"); !s) return s;
  if (Status s = succeeded(cudaMemcpy(exp_avg_sq_.as<float>(), state.state(1), n, cudaMemcpyHostToDevice), "copying AdamW's exp_avg_sq"); !s) return s;
  if (Status s = succeeded(cudaMemcpy(shard_parameters(), rounded.data(), bytes(shard_, kParameterBytes), cudaMemcpyHostToDevice), "copying the parameters' shard");
      !s) {
    return s;
  }
  steps_ = state.steps_taken();
  return group_.all_gather(shard_parameters(), params_, static_cast<size_t>(shard_), comm::DataType::bf16);
}

Status ZeroShards::copy_gradient_shard(std::vector<bf16>& host) const {
  host.resize(static_cast<size_t>(shard_));
  return succeeded(cudaMemcpy(host.data(), shard_gradients(), bytes(shard_, kParameterBytes), cudaMemcpyDeviceToHost), "copying the gradient shard");
}

}  // namespace tessera::engine::cuda
