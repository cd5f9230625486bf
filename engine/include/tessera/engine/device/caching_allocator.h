// A caching allocator for device memory, after PyTorch's CUDA caching
// allocator (c10/cuda/CUDACachingAllocator.cpp): memory is taken from the
// device in segments, handed out in blocks carved from them, and kept when
// freed, for the next request, instead of going back to the device
// (cudaMalloc and cudaFree synchronise the device, and are slow).
//
//   - Sizes round up to 512 bytes (kBlockAlign). Requests of up to 1 MiB
//     (kSmallRequest) share 2 MiB segments (the small pool); larger ones get
//     segments of their size rounded up to 2 MiB (the large pool), PyTorch's
//     kMinBlockSize, kSmallSize, kSmallBuffer and kRoundLarge.
//   - A request takes the smallest free block of its pool that fits (best
//     fit); what is left over is split off as a free block when it is at
//     least 512 bytes (small pool) or more than 1 MiB (large pool: smaller
//     remainders would fragment it), and freed blocks merge with free
//     neighbours of the same segment.
//   - When the device refuses a segment, the allocator returns every wholly
//     free segment to the device and asks once more; then it throws
//     AllocationFailure (tensor.h), naming the category and size.
//
// Every byte held from the device is booked in the ledger (memory_ledger.h)
// in the device space: a block in use under the category it was asked for,
// the rest of the segments (cached, free) under `runtime`, the allocator's
// reserve, so that the ledger's device total is always reserved_bytes().
//
// Streams, as PyTorch's (stream_events.h; CUDACachingAllocator.cpp at commit
// eb42ad6e: BlockComparatorSize, recordStream, free, insert_events,
// process_events, release_cached_blocks):
//   - A segment belongs to the stream of the request that made it, and its
//     blocks are handed out for requests on that stream only: work queued on
//     one stream runs in order, so a block freed there can be reused there at
//     once.
//   - record_stream(block, s) says that stream s (another one) uses the block
//     too. When such a block is freed, an event is recorded on each of those
//     streams; the block is reused (and merged with its neighbours) only
//     after all of them have completed, which allocate() checks first.
//   - release_cached() (and the retry after the device refuses) first waits
//     for those events, then gives back the segments wholly free.
// A block waiting for its events is booked under `runtime`, like the cache.
//
// A capacity (`tessera train --device-memory`) caps what it holds from the
// device, as PyTorch's set_per_process_memory_fraction caps its allocator
// (CUDACachingAllocator.cpp at eb42ad6e: allowed_memory_maximum, checked in
// alloc_block against total_allocated_memory): a segment that would take the
// reserved bytes past it is refused as the device refuses one (the cache is
// emptied and the request tried once more), then the request fails naming
// the capacity, in the CPU engine's words (AllocationFailure::over_capacity).
// What the allocator does not hand out (the CUDA context, cuBLAS's own
// workspace, NCCL's buffers) lies outside it, as in PyTorch.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "tessera/engine/device/memory_source.h"
#include "tessera/engine/device/stream_events.h"
#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {

class CachingAllocator {
 public:
  static constexpr int64_t kBlockAlign = 512;
  static constexpr int64_t kSmallRequest = int64_t{1} << 20;
  static constexpr int64_t kSmallSegment = int64_t{2} << 20;
  static constexpr int64_t kLargeSegmentRound = int64_t{2} << 20;

  // `capacity_bytes`: the most it holds from the device; 0: no cap but the device's own.
  CachingAllocator(MemorySource& source, EventSource& events, MemoryLedger& ledger, int64_t capacity_bytes = 0)
      : source_(source), ledger_(ledger), pending_(events), capacity_(capacity_bytes) {}
  // Waits for the pending frees' events, then gives every segment back;
  // blocks still in use are a bug of the caller's.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (aligned to 512) for work on `stream`, booked under `category`.
  void* allocate(int64_t bytes, MemoryCategory category, StreamId stream = 0);
  // Work on `stream` uses `block` too (PyTorch's record_stream); its own stream needs no record.
  void record_stream(void* block, StreamId stream);
  // Returns a block from allocate() to the cache: at once, or once the
  // streams recorded on it are done with it.
  void free(void* block);
  // Waits for the pending frees, then gives every wholly free segment back to the device (empty_cache).
  void release_cached();

  int64_t reserved_bytes() const { return reserved_; }  // segments held from the device
  int64_t capacity_bytes() const { return capacity_; }  // 0: none
  int64_t in_use_bytes() const { return in_use_; }      // blocks handed out (rounded sizes)
  int64_t segments() const { return static_cast<int64_t>(segments_.size()); }
  size_t pending_frees() const { return pending_.size(); }  // freed blocks waiting for other streams

 private:
  struct Block {
    int64_t size = 0;
    uintptr_t segment = 0;  // the address of the segment the block was carved from
    bool in_use = false;    // handed out, or freed and waiting for other streams
    bool waiting = false;   // freed and waiting for other streams (pending_)
    MemoryCategory category = MemoryCategory::runtime;
    std::set<StreamId> stream_uses;  // other streams that use it (record_stream)
  };
  struct Segment {
    int64_t size = 0;
    bool small = false;  // of the small pool
    StreamId stream = 0; // its blocks serve requests on this stream
  };
  // (stream, size, address): best fit on a stream is lower_bound({stream, size, 0}).
  using FreeSet = std::set<std::tuple<StreamId, int64_t, uintptr_t>>;

  FreeSet& pool(bool small) { return small ? small_free_ : large_free_; }
  FreeSet::iterator best_fit(int64_t size, StreamId stream);
  bool over_capacity(int64_t segment_bytes) const { return capacity_ > 0 && reserved_ + segment_bytes > capacity_; }
  bool new_segment(int64_t size, StreamId stream);
  // Returns the blocks whose streams are done with them to the cache.
  void return_to_cache(const std::vector<uintptr_t>& blocks);
  void insert_free(uintptr_t address, Block block);
  void erase_free(uintptr_t address, const Block& block);
  void merge_into(std::map<uintptr_t, Block>::iterator block);

  MemorySource& source_;
  MemoryLedger& ledger_;
  PendingFrees pending_;
  std::map<uintptr_t, Block> blocks_;           // every block, by address
  std::map<uintptr_t, Segment> segments_;       // every segment, by address
  FreeSet small_free_, large_free_;
  int64_t reserved_ = 0, in_use_ = 0;
  int64_t capacity_ = 0;
};

}  // namespace tessera::engine
