// Gemini for the GPU training step (cuda/gpt_training.h): ColossalAI's
// chunk-based ZeRO-3 as the CPU engine runs it (parallel/gemini.h), on one
// GPU or one GPU per rank over the data-parallel ranks' NCCL communicator
// (comm/nccl.h). The chunks, their contents and placement are the CPU
// engine's (parallel/gemini_chunks.h: planner::pack_chunks, the placement
// rules of gemini_static_placement.h), the moves before each layer the
// shared gathering's (planner::GeminiGathering), and what each move
// allocates, copies and books device/gemini_device_chunks.h's, tested on the
// CPU; here are the CUDA operations under them (CudaChunkCopies: device
// copies on the compute stream, pinned copies on a copy stream, NCCL) and the
// optimizer:
//  - `cuda`: the fp32 master weights and AdamW's states of this rank's slots
//    on the device (master_weights, optimizer_states), updated by the device
//    AdamW (cuda/adamw.h) piece by piece with each parameter's weight decay,
//    rounding into the device weight shards;
//  - `cpu`: on the host, updated by the CPU engine's own optimizer
//    (optimizer.h) over the pinned gradient shards, which the reduce copied
//    down, rounding into the pinned weight shards, which the next gather
//    copies up;
//  - `static`: the leading chunks' slots (their states on the host, as
//    ColossalAI's walk sends them; they lead the shard) as under `cpu`, over
//    the host gradients of each chunk (its pinned shards, or the host copy a
//    chunk on the device exchanges through, whose updated weights go back up
//    from it: gemini_device_chunks.h), the other slots as under `cuda`.
// The gradient norm is global: each rank's sum of squares over its slots,
// all-reduced. `auto` runs as the static placement the planner solved. Never run on a GPU:
// tests/cuda/gemini_gpu_test.cpp checks it against the CPU engine's Gemini.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/pinned_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/device/gemini_device_chunks.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine::cuda {

// ChunkCopies on the GPU: the compute stream is the legacy default stream,
// where the step's kernels run; uploads and downloads are asynchronous
// copies on a copy stream of their own (cuda/pinned_memory.h), ordered by
// events; the collectives are the communicator's blocking calls (none: one GPU).
class CudaChunkCopies final : public ChunkCopies {
 public:
  // Throws on a CUDA failure making the copy stream or its event (as the allocators do).
  CudaChunkCopies(comm::Communicator* group, PinnedHostAllocator& host);
  ~CudaChunkCopies() override;
  CudaChunkCopies(const CudaChunkCopies&) = delete;
  CudaChunkCopies& operator=(const CudaChunkCopies&) = delete;

  Status copy(bf16* device_to, const bf16* device_from, int64_t n) override;
  Status zero(bf16* device, int64_t n) override;
  Status upload(bf16* device, const bf16* pinned, int64_t n) override;
  Status download(bf16* pinned, const bf16* device, int64_t n) override;
  Status wait_for_copies() override;
  StreamId copy_stream() const override { return stream_id(copy_); }
  Status all_gather(bf16* chunk, int64_t shard) override;
  Status reduce_scatter(const bf16* chunk, bf16* shard, int64_t n) override;

 private:
  Status copy_stream_after_compute();
  comm::Communicator* group_;
  PinnedHostAllocator& host_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ordered_ = nullptr;
};

class GeminiShards {
 public:
  // The chunks of `plugin` (gemini, placement cuda, cpu or static; `auto`
  // comes solved: static, with `host_chunks` as gemini_chunk_plan takes
  // them) over `group` (null: one GPU), their optimizer states, booked in
  // `ledger`; bind() points parameter_of and gradient_of (per flat
  // parameter) into the gathered chunks. Throws std::invalid_argument on an unsolved `auto`.
  GeminiShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator* group, const planner::Model& model, const planner::PluginOptions& plugin,
               std::optional<int64_t> host_chunks, std::vector<bool> decay, const OptimizerOptions& options, std::vector<bf16*>& parameter_of,
               std::vector<bf16*>& gradient_of);
  ~GeminiShards();

  // The shards and master weights from the whole model's fp32 weights (flat order, on the host).
  Status start_from(const std::vector<float>& weights);
  Status zero_gradients() { return chunks_->zero_gradients(); }
  // Before a layer's forward or backward (gemini_device_chunks.h).
  Status use_layer(int layer, bool backward) { return chunks_->use_layer(layer, backward); }
  // After the step's last backward: every gradient chunk reduced into its shard.
  Status reduce() { return chunks_->release_all(); }
  // The update: the global gradient norm, or nullopt (not finite: no update).
  // `sum_workspace` (sum_of_squares_workspace_bytes of the largest shard)
  // and `device_sum` (a double and the overflow flag) are device scratch.
  Result<std::optional<double>> step(void* sum_workspace, double* device_sum);

  // Checkpoints: this rank's optimizer layout (planner/optimizer_layout.h);
  // save() and restore() take a host state of that layout, or, on one GPU, of
  // the whole model in flat order (what a one-rank run writes); restore()
  // rounds the weights into the shards.
  const planner::OptimizerLayout& layout() const { return layout_; }
  Status save(FlatAdamWState& state);
  Status restore(FlatAdamWState& state);
  // This rank's weight and gradient shards, slot after slot (layout().shard_numel elements).
  Status copy_shards(std::vector<bf16>& weights, std::vector<bf16>& gradients);

 private:
  // The fp32 weights of this rank's slots rounded into the 16-bit shards.
  Status round_into_shards(const float* master);
  Status all_reduce_sum(double& sum, double* device_sum);
  // This rank's sum of squared gradients: the host's slots on the host, the others on the device.
  Result<double> squared_gradients(void* sum_workspace, double* device_sum);
  // The device AdamW over the slots whose states are on the device.
  Status device_update(const AdamWScalars& scalars);
  // The master weights and AdamW's states of every slot (fp32, slot order): to and from the two sides.
  Status read_states(std::vector<float> (&values)[3]);
  Status write_states(const std::vector<float> (&values)[3], int64_t steps);

  comm::Communicator* group_;
  planner::OptimizerLayout layout_;
  GeminiChunkPlan plan_;
  std::vector<planner::FlatParameter> order_;
  std::vector<bool> decay_;
  OptimizerOptions options_;
  int64_t steps_ = 0;
  CudaPinnedMemory pinned_;
  CudaEvents events_;
  PinnedHostAllocator host_;
  CudaChunkCopies copies_;
  std::unique_ptr<GeminiDeviceChunks> chunks_;
  int64_t host_slots_ = 0;                       // the leading slots whose states are on the host
  DeviceBlock master_, exp_avg_, exp_avg_sq_;    // the others', on the device (from host_slots_)
  std::optional<Optimizer<bf16>> host_optimizer_;  // over the host's slots, where there are any
};

}  // namespace tessera::engine::cuda
