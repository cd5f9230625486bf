// Where the caching allocators get their memory: cudaMalloc/cudaFree for
// device segments (cuda/device_memory.h), cudaHostAlloc/cudaFreeHost for
// pinned host blocks (cuda/pinned_memory.h), fakes in the tests.
#pragma once

#include <cstdint>

namespace tessera::engine {

class MemorySource {
 public:
  virtual ~MemorySource() = default;
  // `bytes` of memory, or null when there is no more.
  virtual void* allocate(int64_t bytes) = 0;
  virtual void release(void* memory) = 0;
};

}  // namespace tessera::engine
