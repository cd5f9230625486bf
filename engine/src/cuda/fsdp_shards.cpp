// FSDP on the GPU step; see fsdp_shards.h.
#include "fsdp_shards.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "cuda_errors.h"
#include "device_adamw_step.h"
#include "global_sum_of_squares.h"
#include "tessera/engine/cuda/adamw.h"
#include "tessera/engine/cuda/casts.h"
#include "tessera/engine/cuda/residual.h"
#include "tessera/engine/device/offload_host_blocks.h"
#include "tessera/engine/model/initialization.h"
#include "tessera/engine/shard_values.h"

namespace tessera::engine::cuda {
namespace {

size_t bytes(int64_t n, size_t element) { return static_cast<size_t>(n) * element; }

}  // namespace

// ---- CudaFsdpOps -----------------------------------------------------------

Status CudaFsdpOps::zero(void* device, int64_t n) { return succeeded(cudaMemsetAsync(device, 0, static_cast<size_t>(n), nullptr), "zeroing an FSDP buffer"); }

Status CudaFsdpOps::cast_shard(bf16* slot, const float* shard, int64_t n) { return succeeded(cast(slot, shard, n, nullptr), "casting a unit's shard to bf16"); }

Status CudaFsdpOps::add_into_shard(float* shard, const bf16* reduced, int64_t n) {
  return succeeded(residual_add(shard, reduced, n, nullptr), "adding a reduced gradient into its shard");
}

Status CudaFsdpOps::start_all_gather(bf16* unit, int64_t shard) {
  return group_->start_all_gather(unit + group_->rank() * shard, unit, static_cast<size_t>(shard), comm::DataType::bf16);
}

Status CudaFsdpOps::start_reduce_scatter(bf16* unit, int64_t shard) {
  const std::vector<size_t> counts(static_cast<size_t>(group_->size()), static_cast<size_t>(shard));
  return group_->start_reduce_scatter_v(unit, unit + group_->rank() * shard, counts, comm::DataType::bf16, comm::ReduceOp::sum);
}

Status CudaFsdpOps::finish_oldest() { return group_->finish_oldest(1); }

Status CudaFsdpOps::copy_up(void* device, const void* host, int64_t bytes) {
  return succeeded(copy_to_device_async(device, host, static_cast<size_t>(bytes), nullptr, *host_), "copying a unit's shard to the device");
}

Status CudaFsdpOps::copy_down(void* host, const void* device, int64_t bytes) {
  return succeeded(copy_to_host_async(host, device, static_cast<size_t>(bytes), nullptr, *host_), "copying a gradient shard to the host");
}

// ---- FsdpHostState ---------------------------------------------------------

FsdpHostState::FsdpHostState(MemoryLedger& ledger, const planner::OptimizerLayout& layout, std::vector<bool> decay, const OptimizerOptions& options)
    : allocator_(pinned_, events_, ledger) {
  const int64_t n = layout.shard_numel;
  shards_ = allocate_fsdp_host_shards(allocator_, n);
  std::fill_n(shards_.weights, n, 0.0f);  // the padding stays 0
  std::fill_n(shards_.gradients, n, 0.0f);
  optimizer_.emplace(ledger, shards_.weights, n, layout.pieces, std::move(decay), options, MemorySpace::host);
}

// The compute stream's copies from and to the shards have run before they go.
FsdpHostState::~FsdpHostState() {
  optimizer_.reset();
  cudaDeviceSynchronize();
  allocator_.free(shards_.gradients);
  allocator_.free(shards_.weights);
}

// ---- FsdpShards ------------------------------------------------------------

FsdpShards::FsdpShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator* group, const planner::Model& model,
                       const planner::PluginOptions& plugin, std::vector<bool> decay, const OptimizerOptions& options, std::vector<bf16*>& parameter_of,
                       std::vector<bf16*>& gradient_of)
    : group_(group),
      layout_(planner::optimizer_layout(model, plugin, group != nullptr ? group->size() : 1, group != nullptr ? group->rank() : 0)),
      decay_(std::move(decay)),
      options_(options),
      host_(plugin.cpu_offload ? std::make_unique<FsdpHostState>(ledger, layout_, decay_, options_) : nullptr),
      ops_(group, host_ != nullptr ? &host_->allocator() : nullptr) {
  const int rank = group != nullptr ? group->rank() : 0, ranks = group != nullptr ? group->size() : 1;
  units_ = std::make_unique<FsdpDeviceUnits>(model, plugin.fsdp_strategy, rank, ranks, allocator, ops_, parameter_of, gradient_of,
                                             host_ != nullptr ? &host_->shards() : nullptr);
}

std::array<float*, 3> FsdpShards::optimizer_shards() const {
  if (host_ != nullptr) return {host_->optimizer().weights(), host_->optimizer().state(0), host_->optimizer().state(1)};
  return {units_->weights(), units_->exp_avg(), units_->exp_avg_sq()};
}

Status FsdpShards::start_from(const planner::Model& model, uint64_t seed) {
  std::vector<float> flat(static_cast<size_t>(model.parameter_count));
  for_each_initial_value(model, seed, [&flat](int64_t i, double value) { flat[static_cast<size_t>(i)] = static_cast<float>(value); });
  std::vector<float> shard(static_cast<size_t>(shard_numel()), 0.0f);  // the padding stays 0
  flat_values_to_shard(layout_.pieces, units_->order(), flat.data(), shard.data());
  return succeeded(cudaMemcpy(units_->weights(), shard.data(), bytes(shard_numel(), sizeof(float)), cudaMemcpyDefault), "copying the weight shard");
}

// Offloaded: the host optimizer once the compute stream's copies of the gradient shards have run.
Result<std::optional<double>> FsdpShards::step_on_host(double* device_sum) {
  if (Status s = succeeded(cudaStreamSynchronize(nullptr), "waiting for the gradient shards"); !s) return s.error();
  Optimizer<float>& optimizer = host_->optimizer();
  const float* gradients = host_->shards().gradients;
  auto sum = sum_over_groups(optimizer.sum_of_squares(gradients, 1.0), device_sum, {group_});
  if (!sum) return sum.error();
  const std::optional<double> norm = optimizer.apply(gradients, sum.value(), 1.0);
  steps_ = optimizer.steps_taken();
  return norm;
}

Result<std::optional<double>> FsdpShards::step(void* sum_workspace, double* device_sum) {
  if (host_ != nullptr) return step_on_host(device_sum);
  auto sum = global_sum_of_squares(units_->gradients(), {{0, shard_numel()}}, device_sum, sum_workspace, {group_});
  if (!sum) return sum.error();
  const std::optional<DeviceAdamWStep> begun = begin_adamw_step(sum.value(), steps_, options_);
  if (!begun) return std::optional<double>();
  for (const planner::ShardPiece& piece : layout_.pieces) {
    const int64_t at = piece.offset_in_shard;
    const float wd = decay_[static_cast<size_t>(piece.parameter)] ? static_cast<float>(options_.weight_decay) : 0.0f;
    float* no_copy = nullptr;  // the fp32 shard is the parameters
    if (Status s = succeeded(adamw(no_copy, units_->weights() + at, units_->exp_avg() + at, units_->exp_avg_sq() + at,
                                   units_->gradients() + at, piece.numel, wd, begun->scalars, nullptr),
                             "adamw");
        !s) {
      return s.error();
    }
  }
  return std::optional<double>(begun->norm);
}

Status FsdpShards::save(FlatAdamWState& state) const {
  const int64_t n = shard_numel();
  const std::array<float*, 3> sources = optimizer_shards();
  float* targets[3] = {state.weights(), state.state(0), state.state(1)};
  std::vector<float> values(static_cast<size_t>(n));
  for (int k = 0; k < 3; ++k) {
    if (Status s = succeeded(cudaMemcpy(values.data(), sources[k], bytes(n, sizeof(float)), cudaMemcpyDefault), "copying the optimizer's shard"); !s) {
      return s;
    }
    if (whole()) {
      shard_values_to_flat(layout_.pieces, units_->order(), values.data(), targets[k]);
    } else {
      std::copy(values.begin(), values.end(), targets[k]);
    }
  }
  state.set_steps_taken(steps_);
  return Status::success();
}

Status FsdpShards::restore(FlatAdamWState& state) {
  const int64_t n = shard_numel();
  const std::array<float*, 3> targets = optimizer_shards();
  const float* sources[3] = {state.weights(), state.state(0), state.state(1)};
  // Offloaded: nothing may be reading the host shards any more.
  if (Status s = succeeded(cudaStreamSynchronize(nullptr), "waiting for the compute stream"); !s) return s;
  for (int k = 0; k < 3; ++k) {
    std::vector<float> values(static_cast<size_t>(n), 0.0f);  // the padding stays 0
    if (whole()) {
      flat_values_to_shard(layout_.pieces, units_->order(), sources[k], values.data());
    } else {
      std::copy(sources[k], sources[k] + n, values.begin());
    }
    if (Status s = succeeded(cudaMemcpy(targets[k], values.data(), bytes(n, sizeof(float)), cudaMemcpyDefault), "copying the optimizer's shard"); !s) {
      return s;
    }
  }
  steps_ = state.steps_taken();
  if (host_ != nullptr) host_->optimizer().set_steps_taken(steps_);
  return Status::success();
}

Status FsdpShards::copy_shards(std::vector<bf16>& weights, std::vector<bf16>& gradients) const {
  const int64_t n = shard_numel();
  std::vector<float> values(static_cast<size_t>(n));
  for (auto [source, target] : {std::pair{static_cast<const float*>(units_->weights()), &weights}, std::pair{static_cast<const float*>(units_->gradients()), &gradients}}) {
    if (Status s = succeeded(cudaMemcpy(values.data(), source, bytes(n, sizeof(float)), cudaMemcpyDefault), "copying a shard"); !s) return s;
    target->resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) (*target)[i] = narrow<bf16>(values[i]);
  }
  return Status::success();
}

}  // namespace tessera::engine::cuda
