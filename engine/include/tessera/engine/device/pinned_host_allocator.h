// Page-locked (pinned) host memory for offload (ZeRO-Offload's optimizer
// states, Gemini's host chunks), cached as PyTorch's CachingHostAllocator
// caches it (aten/src/ATen/core/CachingHostAllocator.h, commit 04456333:
// allocate, free, record_event, process_events, empty_cache). Copies between
// pinned memory and the GPU are asynchronous (cudaMemcpyAsync returns at once
// only from page-locked memory: CUDA Runtime API, "API synchronization
// behavior"), so a block may be handed out again only when the copies queued
// on it have run:
//   - Sizes round up to a power of two (planner::pinned_block_bytes, which
//     the planner's host figures for a GPU run apply to the same blocks:
//     planner/pinned_host_blocks.h); a freed block goes to the free list of
//     its size and is handed out whole to the next request of that size.
//   - record_use(pointer, stream): a copy on `stream` reads or writes the
//     block (PyTorch's record_event). When the block is freed an event is
//     recorded on each such stream, and it joins its free list once all of
//     them have completed (stream_events.h's PendingFrees; checked at every
//     allocate()).
//   - When the source refuses (cudaHostAlloc fails), the allocator waits for
//     the pending frees, gives back the free lists and asks once more; then it
//     throws AllocationFailure naming the category.
// Every byte held is booked in the ledger's host space: a block in use under
// its category, the cached and pending ones under `runtime`, so the ledger's
// host total is reserved_bytes().
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "tessera/engine/device/memory_source.h"
#include "tessera/engine/device/stream_events.h"
#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {

class PinnedHostAllocator {
 public:
  PinnedHostAllocator(MemorySource& source, EventSource& events, MemoryLedger& ledger) : source_(source), ledger_(ledger), pending_(events) {}
  // Waits for the pending frees, then gives every block back; blocks still in
  // use are a bug of the caller's.
  ~PinnedHostAllocator();
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;

  // A block of at least `bytes` (the next power of two), booked under `category` in host space.
  void* allocate(int64_t bytes, MemoryCategory category);
  // Work queued on `stream` reads or writes the block holding `pointer` (any address inside it).
  void record_use(const void* pointer, StreamId stream);
  void free(void* block);
  // Gives the free blocks back (cudaFreeHost); blocks still waiting for their streams stay.
  void release_cached();

  int64_t reserved_bytes() const { return reserved_; }  // pinned memory held
  int64_t in_use_bytes() const { return in_use_; }      // blocks handed out (rounded sizes)
  size_t pending_frees() const { return pending_.size(); }

 private:
  struct Block {
    int64_t size = 0;
    bool in_use = false;   // handed out, or freed and waiting for its streams
    bool waiting = false;  // freed and waiting for its streams
    MemoryCategory category = MemoryCategory::runtime;
    std::set<StreamId> streams;  // streams that use it (record_use)
  };
  void* new_block(int64_t size);
  void return_to_free_lists(const std::vector<uintptr_t>& blocks);

  MemorySource& source_;
  MemoryLedger& ledger_;
  PendingFrees pending_;
  std::map<uintptr_t, Block> blocks_;                  // every block, by address
  std::map<int64_t, std::vector<uintptr_t>> free_;     // free blocks by size
  int64_t reserved_ = 0, in_use_ = 0;
};

}  // namespace tessera::engine
