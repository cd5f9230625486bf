// ZeRO-Offload for the GPU step's ZeRO shards (zero_shards.h; Ren et al.
// 2021, "ZeRO-Offload"; the CPU engine's --cpu-offload,
// parallel/data_parallel.h): the shard's fp32 master weights and AdamW's
// states stay on the host, where the CPU engine's own optimizer updates them
// (optimizer.h: its AdamW, scalars and clipping, adamw_step.h; booked under
// master_weights and optimizer_states in host space, as the planner counts
// them). Only gradients and parameters cross PCIe, through one pinned buffer
// of the planner's fp32 host gradient shard (device/offload_transfer.h;
// device/offload_host_blocks.h): the reduced bf16 gradient shard is copied
// down on a copy stream and widened in place, the global norm's sum of
// squares is all-reduced over the ranks, the optimizer steps and rounds the
// shard's bf16 parameters into the same buffer, and they are copied up on the
// copy stream, which the compute stream (and so the all-gather after it)
// waits for. The norm counts the shard's pieces as the CPU engine's
// strategies count them (Optimizer::counted_sum_of_squares: under tensor and
// pipeline parallelism a replicated parameter on its tp rank 0, a tied
// embedding's copy nowhere) and is summed over the data-parallel ranks, the
// tensor-parallel ranks and the stages: hybrid_parallel's ZeRO offloads each
// rank's shard of its part, as ColossalAI's HybridParallelZeroOptimizer
// passes cpu_offload to LowLevelZeroOptimizer, whose master shard then lives
// on the CPU (_create_master_param_current_rank) and whose step copies each
// gradient shard there in fp32 before the CPU Adam (colossalai/zero/low_level/
// low_level_optim.py, step; booster/plugin/hybrid_parallel_plugin.py at v0.5.0,
// d322ff8c). Never run on a GPU: tests/cuda/zero_gpu_test.cpp and
// hybrid_zero_gpu_test.cpp check it against the CPU engine's ZeRO-Offload.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/pinned_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/device/pinned_host_allocator.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/half.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine::cuda {

class OffloadedShard {
 public:
  // Throws on a CUDA failure making the copy stream or its event (as the allocators do).
  // `counted[p]`: whether the gradient norm counts flat parameter p on this rank (planner::counted_in_gradient_norm).
  OffloadedShard(MemoryLedger& ledger, const planner::OptimizerLayout& layout, std::vector<bool> decay, const OptimizerOptions& options,
                 std::vector<bool> counted);
  ~OffloadedShard();
  OffloadedShard(const OffloadedShard&) = delete;
  OffloadedShard& operator=(const OffloadedShard&) = delete;

  // The master weights from the shard's fp32 weights (shard elements, the padding 0).
  void start_from(const std::vector<float>& shard);
  // The update from the device's reduced gradient shard into the device's
  // parameter shard (both shard elements): the norm, or nullopt (not
  // finite: nothing updated). `groups`: those the norm's square is summed
  // over (global_sum_of_squares.h); `device_sum`: a double of device scratch for their all-reduces.
  Result<std::optional<double>> step(const bf16* device_gradients, bf16* device_parameters, std::initializer_list<comm::Communicator*> groups,
                                     double* device_sum);
  // Checkpoints: copies to and from a host state of the shard's layout;
  // restore() also sends the rounded parameters to `device_parameters`.
  Status save(FlatAdamWState& state);
  Status restore(FlatAdamWState& state, bf16* device_parameters);

 private:
  // Queues the copy stream after the compute stream's work so far.
  Status copy_stream_after_compute();
  // The rounded parameters in the transfer buffer, up to the device; the compute stream waits for them.
  Status send_parameters(bf16* device_parameters);

  int64_t shard_ = 0;
  std::vector<bool> counted_;
  CudaPinnedMemory pinned_;
  CudaEvents events_;
  PinnedHostAllocator host_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ordered_ = nullptr;
  float* transfer_ = nullptr;  // pinned, shard fp32 elements; the optimizer's 16-bit parameters live over its start
  std::optional<Optimizer<bf16>> optimizer_;
};

}  // namespace tessera::engine::cuda
