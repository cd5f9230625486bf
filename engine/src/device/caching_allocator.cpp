#include "tessera/engine/device/caching_allocator.h"

#include "tessera/engine/tensor.h"
#include "tessera/planner/status.h"

namespace tessera::engine {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The segment a request of `size` (rounded to 512) takes: 2 MiB for the small pool, else the size rounded up to 2 MiB.
int64_t segment_bytes(int64_t size) {
  return size <= CachingAllocator::kSmallRequest ? CachingAllocator::kSmallSegment : round_up(size, CachingAllocator::kLargeSegmentRound);
}

}  // namespace

CachingAllocator::~CachingAllocator() {
  pending_.take_all();  // the segments go back only when no stream uses them
  for (const auto& [address, segment] : segments_) source_.release(reinterpret_cast<void*>(address));
}

CachingAllocator::FreeSet::iterator CachingAllocator::best_fit(int64_t size, StreamId stream) {
  FreeSet& free_blocks = pool(size <= kSmallRequest);
  auto fit = free_blocks.lower_bound({stream, size, 0});
  return fit != free_blocks.end() && std::get<0>(*fit) == stream ? fit : free_blocks.end();
}

void* CachingAllocator::allocate(int64_t bytes, MemoryCategory category, StreamId stream) {
  return_to_cache(pending_.take_completed());
  const int64_t size = round_up(bytes < 1 ? 1 : bytes, kBlockAlign);
  FreeSet& free_blocks = pool(size <= kSmallRequest);
  auto fit = best_fit(size, stream);
  if (fit == free_blocks.end()) {
    if (!new_segment(size, stream)) {
      release_cached();  // the cache may hold what the device is missing
      if (!new_segment(size, stream)) {
        if (over_capacity(segment_bytes(size))) throw AllocationFailure::over_capacity(MemorySpace::device, category, bytes, reserved_, capacity_);
        throw AllocationFailure(category, bytes);
      }
    }
    fit = best_fit(size, stream);
  }
  TESSERA_CHECK(fit != free_blocks.end(), "caching allocator: a new segment does not fit its own request");
  const uintptr_t address = std::get<2>(*fit);
  Block block = blocks_.at(address);
  erase_free(address, block);
  const int64_t rest = block.size - size;
  const bool split = size <= kSmallRequest ? rest >= kBlockAlign : rest > kSmallRequest;
  if (split) {
    insert_free(address + static_cast<uintptr_t>(size), Block{rest, block.segment, false, false, MemoryCategory::runtime, {}});
    block.size = size;
  }
  block.in_use = true;
  block.category = category;
  blocks_[address] = block;
  in_use_ += block.size;
  ledger_.moved(MemoryCategory::runtime, category, MemorySpace::device, block.size);
  return reinterpret_cast<void*>(address);
}

void CachingAllocator::record_stream(void* pointer, StreamId stream) {
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(pointer));
  TESSERA_CHECK(it != blocks_.end() && it->second.in_use && !it->second.waiting, "caching allocator: record_stream on a pointer it did not hand out");
  // Uses on the block's own stream are ordered with its next request there.
  if (stream != segments_.at(it->second.segment).stream) it->second.stream_uses.insert(stream);
}

void CachingAllocator::free(void* pointer) {
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(pointer));
  TESSERA_CHECK(it != blocks_.end() && it->second.in_use && !it->second.waiting, "caching allocator: freeing a pointer it did not hand out, or twice");
  Block& block = it->second;
  in_use_ -= block.size;
  ledger_.moved(block.category, MemoryCategory::runtime, MemorySpace::device, block.size);
  block.category = MemoryCategory::runtime;  // no longer the caller's: cached, or waiting for its streams
  block.waiting = pending_.defer(it->first, block.stream_uses);
  if (block.waiting) return;
  block.in_use = false;
  merge_into(it);
}

void CachingAllocator::return_to_cache(const std::vector<uintptr_t>& addresses) {
  for (uintptr_t address : addresses) {
    auto it = blocks_.find(address);
    it->second.in_use = false;
    it->second.waiting = false;
    merge_into(it);
  }
}

void CachingAllocator::release_cached() {
  return_to_cache(pending_.take_all());
  for (auto segment = segments_.begin(); segment != segments_.end();) {
    const uintptr_t address = segment->first;
    const int64_t size = segment->second.size;
    auto block = blocks_.find(address);
    if (block->second.in_use || block->second.size != size) {
      ++segment;
      continue;
    }
    erase_free(address, block->second);
    blocks_.erase(block);
    source_.release(reinterpret_cast<void*>(address));
    reserved_ -= size;
    ledger_.freed(MemoryCategory::runtime, MemorySpace::device, size);
    segment = segments_.erase(segment);
  }
}

// A segment for a request of `size` on `stream`, unless it would pass the capacity or the device refuses it.
bool CachingAllocator::new_segment(int64_t size, StreamId stream) {
  const bool small = size <= kSmallRequest;
  const int64_t bytes = segment_bytes(size);
  if (over_capacity(bytes)) return false;
  void* memory = source_.allocate(bytes);
  if (memory == nullptr) return false;
  const auto address = reinterpret_cast<uintptr_t>(memory);
  segments_[address] = Segment{bytes, small, stream};
  reserved_ += bytes;
  ledger_.allocated(MemoryCategory::runtime, MemorySpace::device, bytes);
  insert_free(address, Block{bytes, address, false, false, MemoryCategory::runtime, {}});
  return true;
}

void CachingAllocator::insert_free(uintptr_t address, Block block) {
  const Segment& segment = segments_.at(block.segment);
  blocks_[address] = block;
  pool(segment.small).insert({segment.stream, block.size, address});
}

void CachingAllocator::erase_free(uintptr_t address, const Block& block) {
  const StreamId stream = segments_.at(block.segment).stream;
  small_free_.erase({stream, block.size, address});
  large_free_.erase({stream, block.size, address});
}

// Merges a block just freed with its free neighbours in the same segment.
void CachingAllocator::merge_into(std::map<uintptr_t, Block>::iterator it) {
  auto next = std::next(it);
  if (next != blocks_.end() && !next->second.in_use && next->second.segment == it->second.segment) {
    erase_free(next->first, next->second);
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.in_use && prev->second.segment == it->second.segment) {
      erase_free(prev->first, prev->second);
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  insert_free(it->first, it->second);
}

}  // namespace tessera::engine
