// Gemini's chunks in the GPU step's memory (src/cuda/gemini_shards.h): what
// each move of the shared gathering (parallel/gemini_chunks.h) allocates,
// copies and frees, as ColossalAI's Chunk does (colossalai/zero/gemini/chunk/
// chunk.py, v0.5.0 d322ff8c: __gather allocates the whole chunk and drops
// the shard, __scatter the reverse). Plain host code over an interface of
// device operations (ChunkCopies: CUDA's in the GPU step, a recorder in the
// tests), so that which chunk moves when, every transfer and every booking
// is checked on the CPU.
//
// A chunk whose 16-bit shards live on the device (`cuda`): its parameter and
// gradient shards are device blocks (`parameters`, `gradients`). Gathered,
// the whole chunk is a block of its capacity (`chunk_buffers`), the shard
// copied into this rank's slot, the shard's block freed and the slot booked
// back under `parameters`, then all-gathered in place; a gradient chunk
// beside it likewise (its slot the accumulated shard, the rest zero, booked
// under `gradients`). Released, the slot goes back into a shard block; a
// gradient chunk is reduce-scattered into a new shard block. So after every
// move the categories hold what the planner counts (planner/memory_model.cpp,
// add_gemini_states: each shard under its category, the rest of a gathered
// chunk under chunk_buffers); only while a chunk is being gathered do both
// its shard and the whole chunk exist, so chunk_buffers peaks up to one shard
// above the planner's peak, as ColossalAI's alloc_storage does before it
// drops its cuda_shard.
//
// A chunk whose shards live on the host (`cpu`): its shards are pinned host
// blocks (device/pinned_host_allocator.h, booked in host space; the blocks
// planner::gemini_chunk_host_blocks lists and the planner counts), and a
// gathered chunk is a device block of its capacity under chunk_buffers, as
// the planner counts it: the shard goes up into this rank's slot by an
// asynchronous copy on the copy stream, which the compute stream waits for;
// on reduce, this rank's reduced slot comes down into the pinned gradient
// shard on the copy stream, after the compute stream's work, and the block
// is reused only once that copy has run (CachingAllocator::record_stream).
// The host reads or writes the shards only after wait_for_copies().
//
// A chunk on the device whose fp32 states are on the host (`static` with
// offload_optim_frac between 0 and 1, or 1 with offload_param_frac below 1;
// `auto` as solved; GeminiChunk::exchanges_through_host) also keeps a pinned host copy of its
// shard, booked under gradients on the host as the planner counts it
// (planner::exchanges_through_host): once a step, after the last reduce, its
// gradient shard comes down into it on the copy stream for the host
// optimizer, which then writes the updated 16-bit weights into it, and they
// go up into the device weight shard (weights_up). Nothing else of such a
// chunk crosses PCIe.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/device/pinned_host_allocator.h"
#include "tessera/engine/half.h"
#include "tessera/engine/parallel/gemini_chunks.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

// The device operations the moves need, counted in bf16 elements. The
// compute stream's run in its order; the copy stream's after the compute
// stream's work so far, and the compute stream's next work after an upload.
class ChunkCopies {
 public:
  virtual ~ChunkCopies() = default;
  virtual Status copy(bf16* device_to, const bf16* device_from, int64_t n) = 0;  // compute stream
  virtual Status zero(bf16* device, int64_t n) = 0;                            // compute stream
  virtual Status upload(bf16* device, const bf16* pinned, int64_t n) = 0;      // copy stream
  virtual Status download(bf16* pinned, const bf16* device, int64_t n) = 0;    // copy stream
  virtual Status wait_for_copies() = 0;  // the host waits for the copy stream
  virtual StreamId copy_stream() const = 0;
  // Over the data-parallel ranks: `chunk` (ranks · shard) gathered in place
  // from this rank's slot; `chunk` summed over the ranks and this rank's
  // slot of the sum written to `shard` (which may be that slot).
  virtual Status all_gather(bf16* chunk, int64_t shard) = 0;
  virtual Status reduce_scatter(const bf16* chunk, bf16* shard, int64_t n) = 0;
};

class GeminiDeviceChunks final : private GeminiChunkMoves {
 public:
  // The shards of `plan` for this `rank` of `ranks`, zeroed (the caller
  // fills the weights); `ledger`: the one both allocators book into. bind()
  // writes each flat parameter's place in its gathered chunk into
  // parameter_of and gradient_of (null where no gradient chunk is open).
  GeminiDeviceChunks(const GeminiChunkPlan& plan, int rank, int ranks, CachingAllocator& device, PinnedHostAllocator& host, MemoryLedger& ledger,
                     ChunkCopies& copies, std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of);
  ~GeminiDeviceChunks() override;
  GeminiDeviceChunks(const GeminiDeviceChunks&) = delete;
  GeminiDeviceChunks& operator=(const GeminiDeviceChunks&) = delete;

  // Before `layer` (planner::kEmbeddingLayer .. num_layers, the head) runs
  // forward or backward (recompute included), in every micro-batch.
  Status use_layer(int layer, bool backward) {
    use_gemini_layer(gathering_, layer, backward, *this);
    return error_;
  }
  // After the step's last backward: every chunk released, its gradients
  // reduced into the shard, and those of the chunks that exchange through
  // the host on their way down into the host copy.
  Status release_all();
  Status zero_gradients();
  // After the host optimizer wrote host_weights() of the chunks that
  // exchange through the host: those weights up into their device shards.
  Status weights_up();

  // The shards, between steps (nothing gathered): device blocks, or pinned host ones.
  bf16* weight_shard(size_t chunk) const { return chunks_[chunk].weights; }
  bf16* gradient_shard(size_t chunk) const { return chunks_[chunk].gradients; }
  // A chunk whose states are on the host (after wait_for_copies): where the
  // host optimizer reads its gradients and writes its 16-bit weights, the
  // pinned shards or the host copy it exchanges through (the same memory, read before written).
  const bf16* host_gradients(size_t chunk) const { return plan_.chunks[chunk].on_host ? chunks_[chunk].gradients : chunks_[chunk].exchanged; }
  bf16* host_weights(size_t chunk) const { return plan_.chunks[chunk].on_host ? chunks_[chunk].weights : chunks_[chunk].exchanged; }
  int64_t host_moves() const { return moves_; }  // shards gone up or down (the CPU engine's Gemini::chunk_moves)

 private:
  struct Chunk {
    bf16* weights = nullptr;    // the shard; null while gathered on the device
    bf16* gradients = nullptr;  // likewise
    DeviceBlock gathered, gathered_gradients;  // the whole chunk while gathered
    bf16* exchanged = nullptr;  // pinned: the host copy of a chunk that exchanges through the host
  };
  void gather(int chunk) override;
  void open_gradients(int chunk) override;
  void reduce(int chunk) override;
  void release(int chunk) override;
  void bind(int chunk) override;
  // The whole chunk with the shard in this rank's slot: a device shard
  // copied there (its block freed, its bytes booked to the slot), a host one uploaded.
  DeviceBlock grow(int chunk, bf16*& shard, MemoryCategory category);
  bf16* new_shard(int chunk, MemoryCategory category);  // a device chunk's (host chunks keep their pinned shards)
  void free_shard(int chunk, bf16* shard);
  int64_t slot_bytes(int chunk) const;  // a device shard's booked bytes
  bool run(const Status& status);       // keeps the first error; false once there is one

  const GeminiChunkPlan& plan_;
  int rank_ = 0, ranks_ = 1;
  CachingAllocator& device_;
  PinnedHostAllocator& host_;
  MemoryLedger& ledger_;
  ChunkCopies& copies_;
  std::vector<bf16*>& parameter_of_;
  std::vector<bf16*>& gradient_of_;
  planner::GeminiGathering gathering_;
  std::vector<Chunk> chunks_;
  int64_t moves_ = 0;
  Status error_ = Status::success();
};

}  // namespace tessera::engine
