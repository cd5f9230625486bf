// FSDP for the GPU training step (cuda/gpt_training.h): torch_fsdp as the
// CPU engine runs it (parallel/fsdp.h), on one GPU or one GPU per rank over
// the data-parallel ranks' NCCL communicator (comm/nccl.h). The units, their
// shards and the order in which they are gathered, reduced and released are
// the CPU engine's (planner::fsdp_layout, parallel/fsdp_schedule.h); what
// each move allocates and books is device/fsdp_device_units.h's, tested on
// the CPU; here are the CUDA and NCCL operations under them (CudaFsdpOps)
// and the optimizer:
//  - a gather casts this rank's fp32 shard of the unit into its slot of a
//    bf16 buffer (cuda/casts.h) and starts its all-gather in place on NCCL's
//    stream (start_all_gather: the prefetched unit's runs while the compute
//    stream runs the current unit);
//  - a unit's bf16 gradient is reduce-scattered in place, started on NCCL's
//    stream after the compute stream's backward (start_reduce_scatter_v),
//    and this rank's reduced slot added into the fp32 gradient shard
//    (cuda/residual.h); the started calls finish in order;
//  - the step: the global gradient norm (each rank's sum of squares of its
//    fp32 gradient shard, all-reduced), then AdamW on the fp32 weight shard
//    piece by piece with each parameter's weight decay (cuda/adamw.h, no
//    16-bit copy: the next gathers cast the weights), as the CPU engine's
//    Optimizer<float> over the same pieces (planner::fsdp_pieces).
// With --cpu-offload (FSDP's CPUOffload, planner/fsdp_offload.h) the fp32
// weight and gradient shards live in pinned host memory (device/
// offload_host_blocks.h, booked as host parameters and gradients) and the
// device units copy each unit's shard up before its gather and its reduced
// gradient shard down after its reduce-scatter, on the compute stream
// (fsdp_device_units.h); the step waits for the compute stream, sums the
// squares of the host gradient shard, all-reduces them and runs the CPU
// engine's AdamW (optimizer.h, Optimizer<float>, its states booked on the
// host) on the host weights in place, which the next gathers copy up, as
// the GPU step's ZeRO-Offload runs its host optimizer (zero_offload.h).
// On one GPU (no communicator) nothing is communicated: every unit's shard is
// the whole unit, cast into its buffer before it runs, and the step is the
// plain one's arithmetic on fp32 gradients. Checkpoints are the CPU engine's:
// every rank's shard files on 2 or more ranks (sharded_checkpoint.h, the
// layout of planner/optimizer_layout.h), the whole model in flat order on one.
// Never run on a GPU: tests/cuda/fsdp_gpu_test.cpp checks it against the CPU engine's FSDP.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/pinned_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/device/pinned_host_allocator.h"
#include "tessera/engine/device/fsdp_device_units.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine::cuda {

// FsdpUnitOps on the GPU: kernels and copies on the legacy default stream
// (the compute stream), collectives on the communicator (none: one GPU).
class CudaFsdpOps final : public FsdpUnitOps {
 public:
  // `host`: the pinned memory offloaded shards live in (their copies are recorded on it), or null.
  CudaFsdpOps(comm::Communicator* group, PinnedHostAllocator* host) : group_(group), host_(host) {}
  Status zero(void* device, int64_t bytes) override;
  Status cast_shard(bf16* slot, const float* shard, int64_t n) override;
  Status add_into_shard(float* shard, const bf16* reduced, int64_t n) override;
  Status start_all_gather(bf16* unit, int64_t shard) override;
  Status start_reduce_scatter(bf16* unit, int64_t shard) override;
  Status finish_oldest() override;
  Status copy_up(void* device, const void* host, int64_t bytes) override;
  Status copy_down(void* host, const void* device, int64_t bytes) override;

 private:
  comm::Communicator* group_;
  PinnedHostAllocator* host_;
};

// The offloaded shards (FsdpHostShards) in pinned memory, and the host optimizer over them.
class FsdpHostState {
 public:
  FsdpHostState(MemoryLedger& ledger, const planner::OptimizerLayout& layout, std::vector<bool> decay, const OptimizerOptions& options);
  ~FsdpHostState();
  FsdpHostState(const FsdpHostState&) = delete;
  FsdpHostState& operator=(const FsdpHostState&) = delete;

  PinnedHostAllocator& allocator() { return allocator_; }
  const FsdpHostShards& shards() const { return shards_; }
  Optimizer<float>& optimizer() { return *optimizer_; }

 private:
  CudaPinnedMemory pinned_;
  CudaEvents events_;
  PinnedHostAllocator allocator_;
  FsdpHostShards shards_;
  std::optional<Optimizer<float>> optimizer_;  // over shards_.weights, its states on the host
};

class FsdpShards {
 public:
  // The units of `model` under `plugin` (torch_fsdp) over `group` (null: one
  // GPU), booked by `allocator`; parameter_of and gradient_of (per flat
  // parameter) point into the gathered units around each layer.
  FsdpShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator* group, const planner::Model& model, const planner::PluginOptions& plugin,
             std::vector<bool> decay, const OptimizerOptions& options, std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of);

  // The weight shard from the model's initial fp32 values (the CPU engine's FSDP initialize), AdamW's states zero.
  Status start_from(const planner::Model& model, uint64_t seed);
  Status zero_gradients() { return units_->zero_gradients(); }
  Status before_forward(int layer) { return units_->before_forward(layer); }
  Status after_forward(int layer) { return units_->after_forward(layer); }
  Status before_backward(int layer) { return units_->before_backward(layer); }
  Status after_backward(int layer) { return units_->after_backward(layer); }
  // After the step's last backward: every unit's reduction in the gradient shard.
  Status reduce() { return units_->finish_reductions(); }
  // The update: the global gradient norm before clipping, or nullopt (not
  // finite: no update). `sum_workspace` (sum_of_squares_workspace_bytes of
  // the shard) and `device_sum` (a double and the overflow flag) are device scratch.
  Result<std::optional<double>> step(void* sum_workspace, double* device_sum);
  int64_t shard_numel() const { return units_->layout().shard_numel; }

  // Checkpoints: this rank's optimizer layout (planner/optimizer_layout.h);
  // save() and restore() take a host state of that layout, or, on one GPU,
  // of the whole model in flat order (what a one-rank run writes).
  const planner::OptimizerLayout& layout() const { return layout_; }
  Status save(FlatAdamWState& state) const;
  Status restore(FlatAdamWState& state);
  // This rank's fp32 weight and gradient shards, rounded to bf16 (shard_numel elements).
  Status copy_shards(std::vector<bf16>& weights, std::vector<bf16>& gradients) const;
  bool offloaded() const { return host_ != nullptr; }  // --cpu-offload: the shards live on the host

 private:
  bool whole() const { return group_ == nullptr; }  // one GPU: checkpoints hold the model in flat order
  Result<std::optional<double>> step_on_host(double* device_sum);
  // The fp32 weight shard and AdamW's two states: on the device, or offloaded on the host.
  std::array<float*, 3> optimizer_shards() const;

  comm::Communicator* group_;
  planner::OptimizerLayout layout_;
  std::vector<bool> decay_;
  OptimizerOptions options_;
  int64_t steps_ = 0;
  std::unique_ptr<FsdpHostState> host_;  // --cpu-offload; outlives the units, whose copies use its memory
  CudaFsdpOps ops_;
  std::unique_ptr<FsdpDeviceUnits> units_;
};

}  // namespace tessera::engine::cuda
