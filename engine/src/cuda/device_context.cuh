// The thread context of kernel bodies on a GPU (kernels/thread_context.h):
// CUDA's built-in variables, dynamic shared memory, __syncthreads and
// full-warp shuffles (CUDA C++ Programming Guide, "Warp Shuffle Functions").
#pragma once

#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::cuda {

// The block's dynamic shared memory (the launch's third <<<>>> argument),
// aligned for any type a kernel keeps there.
extern __shared__ __align__(16) unsigned char dynamic_shared[];

struct DeviceContext {
  __device__ unsigned block_idx() const { return blockIdx.x; }
  __device__ unsigned thread_idx() const { return threadIdx.x; }
  __device__ unsigned block_dim() const { return blockDim.x; }
  __device__ unsigned grid_dim() const { return gridDim.x; }
  template <typename T>
  __device__ T* shared() const {
    return reinterpret_cast<T*>(dynamic_shared);
  }
  __device__ void sync() const { __syncthreads(); }
  template <typename T>
  __device__ T shfl_xor(T value, unsigned lane_mask) const {
    return __shfl_xor_sync(0xffffffffu, value, static_cast<int>(lane_mask));
  }
};

// Launches kernel<<<shape>>>(args...) on `stream` and returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), kernels::LaunchShape shape, cudaStream_t stream, Args... args) {
  kernel<<<shape.grid, shape.block, shape.shared_bytes, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace tessera::engine::cuda
