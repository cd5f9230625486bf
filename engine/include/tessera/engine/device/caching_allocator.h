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
// One stream only: a block freed is reused at once, which is safe when all
// work runs on one stream in order (several streams need events per block).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {

// Where segments come from: cudaMalloc and cudaFree on a GPU
// (cuda/device_memory.h), a fake in the tests.
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource() = default;
  // `bytes` of device memory, or null when the device has no more.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* segment) = 0;
};

class CachingAllocator {
 public:
  static constexpr int64_t kBlockAlign = 512;
  static constexpr int64_t kSmallRequest = int64_t{1} << 20;
  static constexpr int64_t kSmallSegment = int64_t{2} << 20;
  static constexpr int64_t kLargeSegmentRound = int64_t{2} << 20;

  CachingAllocator(DeviceMemorySource& source, MemoryLedger& ledger) : source_(source), ledger_(ledger) {}
  // Gives every segment back; blocks still in use are a bug of the caller's.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (aligned to 512), booked under `category`.
  void* allocate(int64_t bytes, MemoryCategory category);
  // Returns a block from allocate() to the cache.
  void free(void* block);
  // Gives every wholly free segment back to the device (empty_cache).
  void release_cached();

  int64_t reserved_bytes() const { return reserved_; }  // segments held from the device
  int64_t in_use_bytes() const { return in_use_; }      // blocks handed out (rounded sizes)
  int64_t segments() const { return static_cast<int64_t>(segments_.size()); }

 private:
  struct Block {
    int64_t size = 0;
    uintptr_t segment = 0;  // the address of the segment the block was carved from
    bool in_use = false;
    MemoryCategory category = MemoryCategory::runtime;
  };
  struct Segment {
    int64_t size = 0;
    bool small = false;  // of the small pool
  };
  using FreeSet = std::set<std::pair<int64_t, uintptr_t>>;  // (size, address): best fit is lower_bound

  FreeSet& pool(bool small) { return small ? small_free_ : large_free_; }
  bool new_segment(int64_t size);
  void insert_free(uintptr_t address, Block block);
  void erase_free(uintptr_t address, const Block& block);
  void merge_into(std::map<uintptr_t, Block>::iterator block);

  DeviceMemorySource& source_;
  MemoryLedger& ledger_;
  std::map<uintptr_t, Block> blocks_;           // every block, by address
  std::map<uintptr_t, Segment> segments_;       // every segment, by address
  FreeSet small_free_, large_free_;
  int64_t reserved_ = 0, in_use_ = 0;
};

}  // namespace tessera::engine
