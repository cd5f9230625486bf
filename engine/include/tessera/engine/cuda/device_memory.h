// Segments of GPU memory for the caching allocator
// (device/caching_allocator.h): cudaMalloc and cudaFree on the current device.
#pragma once

#include "tessera/engine/device/memory_source.h"

namespace tessera::engine::cuda {

class CudaDeviceMemory final : public MemorySource {
 public:
  // Null when cudaMalloc fails (out of memory, or no device): the allocator
  // then empties its cache and asks again before it reports the failure.
  void* allocate(int64_t bytes) override;
  void release(void* segment) override;
};

}  // namespace tessera::engine::cuda
