// Pinned host memory for the pinned host allocator
// (device/pinned_host_allocator.h), and the asynchronous copies between it and
// the GPU that offload queues on a stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "tessera/engine/device/memory_source.h"
#include "tessera/engine/device/pinned_host_allocator.h"

namespace tessera::engine::cuda {

// cudaHostAlloc (portable across devices) and cudaFreeHost; null when
// cudaHostAlloc fails, after which the allocator empties its cache and asks again.
class CudaPinnedMemory final : public MemorySource {
 public:
  void* allocate(int64_t bytes) override;
  void release(void* memory) override;
};

// cudaMemcpyAsync on `stream` between `pinned` (inside a block of `host`)
// and device memory, returning at once; the block is recorded as used by
// `stream`, so it is not handed out again until the copy has run. The caller
// waits on `stream` (an event, cudaStreamSynchronize) before reading what was
// copied. Returns CUDA's error.
cudaError_t copy_to_device_async(void* device, const void* pinned, size_t bytes, cudaStream_t stream, PinnedHostAllocator& host);
cudaError_t copy_to_host_async(void* pinned, const void* device, size_t bytes, cudaStream_t stream, PinnedHostAllocator& host);

}  // namespace tessera::engine::cuda
