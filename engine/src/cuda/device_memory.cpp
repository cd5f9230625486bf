#include "tessera/engine/cuda/device_memory.h"

#include <cuda_runtime_api.h>

namespace tessera::engine::cuda {

void* CudaDeviceMemory::allocate(int64_t bytes) {
  void* memory = nullptr;
  if (cudaMalloc(&memory, static_cast<size_t>(bytes)) != cudaSuccess) {
    cudaGetLastError();  // cudaMalloc's error is not sticky: clear it so that later launches do not report it
    return nullptr;
  }
  return memory;
}

void CudaDeviceMemory::release(void* segment) { cudaFree(segment); }

}  // namespace tessera::engine::cuda
