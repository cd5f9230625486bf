#include "tessera/engine/device/pinned_host_allocator.h"

#include "tessera/engine/tensor.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

PinnedHostAllocator::~PinnedHostAllocator() {
  pending_.take_all();  // no copy may still touch what goes back
  for (const auto& [address, block] : blocks_) source_.release(reinterpret_cast<void*>(address));
}

void* PinnedHostAllocator::allocate(int64_t bytes, MemoryCategory category) {
  return_to_free_lists(pending_.take_completed());
  // Rounded as PyTorch rounds (so that freed blocks fit later requests) and as the planner counts.
  const int64_t size = planner::pinned_block_bytes(bytes < 1 ? 1 : bytes);
  uintptr_t address = 0;
  if (auto list = free_.find(size); list != free_.end() && !list->second.empty()) {
    address = list->second.back();
    list->second.pop_back();
  } else {
    void* memory = new_block(size);
    if (memory == nullptr) {
      return_to_free_lists(pending_.take_all());  // the cache may hold what the host is missing
      release_cached();
      memory = new_block(size);
      if (memory == nullptr) throw AllocationFailure(category, bytes);
    }
    address = reinterpret_cast<uintptr_t>(memory);
  }
  Block& block = blocks_.at(address);
  block.in_use = true;
  block.category = category;
  in_use_ += size;
  ledger_.moved(MemoryCategory::runtime, category, MemorySpace::host, size);
  return reinterpret_cast<void*>(address);
}

void PinnedHostAllocator::record_use(const void* pointer, StreamId stream) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  auto it = blocks_.upper_bound(address);
  TESSERA_CHECK(it != blocks_.begin(), "pinned host allocator: record_use on memory it did not hand out");
  --it;
  TESSERA_CHECK(address < it->first + static_cast<uintptr_t>(it->second.size) && it->second.in_use && !it->second.waiting,
                "pinned host allocator: record_use on memory it did not hand out");
  it->second.streams.insert(stream);
}

void PinnedHostAllocator::free(void* pointer) {
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(pointer));
  TESSERA_CHECK(it != blocks_.end() && it->second.in_use && !it->second.waiting, "pinned host allocator: freeing a pointer it did not hand out, or twice");
  Block& block = it->second;
  in_use_ -= block.size;
  ledger_.moved(block.category, MemoryCategory::runtime, MemorySpace::host, block.size);
  block.category = MemoryCategory::runtime;
  block.waiting = pending_.defer(it->first, block.streams);
  if (!block.waiting) return_to_free_lists({it->first});
}

void PinnedHostAllocator::return_to_free_lists(const std::vector<uintptr_t>& addresses) {
  for (uintptr_t address : addresses) {
    Block& block = blocks_.at(address);
    block.in_use = false;
    block.waiting = false;
    free_[block.size].push_back(address);
  }
}

void PinnedHostAllocator::release_cached() {
  return_to_free_lists(pending_.take_completed());  // PyTorch's empty_cache processes the events that have completed, and waits for none
  for (auto& [size, list] : free_) {
    for (uintptr_t address : list) {
      source_.release(reinterpret_cast<void*>(address));
      blocks_.erase(address);
      reserved_ -= size;
      ledger_.freed(MemoryCategory::runtime, MemorySpace::host, size);
    }
  }
  free_.clear();
}

void* PinnedHostAllocator::new_block(int64_t size) {
  void* memory = source_.allocate(size);
  if (memory == nullptr) return nullptr;
  blocks_[reinterpret_cast<uintptr_t>(memory)] = Block{size, false, false, MemoryCategory::runtime, {}};
  reserved_ += size;
  ledger_.allocated(MemoryCategory::runtime, MemorySpace::host, size);
  return memory;
}

}  // namespace tessera::engine
