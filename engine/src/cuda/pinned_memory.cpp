#include "tessera/engine/cuda/pinned_memory.h"

#include "tessera/engine/cuda/stream_events.h"

namespace tessera::engine::cuda {

void* CudaPinnedMemory::allocate(int64_t bytes) {
  void* memory = nullptr;
  if (cudaHostAlloc(&memory, static_cast<size_t>(bytes), cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so that later calls do not report it
    return nullptr;
  }
  return memory;
}

void CudaPinnedMemory::release(void* memory) { cudaFreeHost(memory); }

cudaError_t copy_to_device_async(void* device, const void* pinned, size_t bytes, cudaStream_t stream, PinnedHostAllocator& host) {
  host.record_use(pinned, stream_id(stream));
  return cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, stream);
}

cudaError_t copy_to_host_async(void* pinned, const void* device, size_t bytes, cudaStream_t stream, PinnedHostAllocator& host) {
  host.record_use(pinned, stream_id(stream));
  return cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, stream);
}

}  // namespace tessera::engine::cuda
