// The contract between a kernel body and whoever runs it. Each hand-written
// kernel is one function template, `<name>_body(ctx, outputs..., inputs...,
// dimensions...)`, run once per thread:
//   - on a GPU by a __global__ wrapper that passes a DeviceContext
//     (engine/src/cuda/device_context.cuh), launched by nvcc's <<<grid, block, shared>>>;
//   - in the tests by the block emulator (tests/kernels/block_emulator.h), which
//     runs every thread of every block on the CPU with the same launch shape.
// A context `ctx` offers exactly what CUDA gives a thread (CUDA C++
// Programming Guide, "Built-in Variables" and "Synchronization Functions"),
// one-dimensional only, since every kernel here is:
//   ctx.block_idx(), ctx.thread_idx(), ctx.block_dim(), ctx.grid_dim()   blockIdx.x ...
//   ctx.template shared<T>()     the block's dynamic shared memory as T*
//   ctx.sync()                   __syncthreads(): every thread of the block, no exceptions
//   ctx.shfl_xor(v, lane_mask)   __shfl_xor_sync(0xffffffff, v, lane_mask): all 32 lanes
// Bodies call sync() and shfl_xor() from code every thread of the block
// reaches (no early return before a barrier): the emulator fails a launch
// that breaks this, where a GPU would hang or read garbage.
#pragma once

#include <cstddef>
#include <cstdint>

// Kernel bodies are device functions under nvcc and plain inline functions
// for the host compiler; they are never called from host code under nvcc.
#if defined(__CUDACC__)
#define TESSERA_KERNEL_BODY __device__ inline
#else
#define TESSERA_KERNEL_BODY inline
#endif

namespace tessera::engine::kernels {

// Threads per warp on every NVIDIA architecture to date (CUDA C++
// Programming Guide, "SIMT Architecture").
inline constexpr unsigned kWarpSize = 32;

// How a kernel is launched: the same numbers on the GPU and in the emulator.
struct LaunchShape {
  unsigned grid = 1;         // blocks (gridDim.x)
  unsigned block = 1;        // threads per block (blockDim.x)
  size_t shared_bytes = 0;   // dynamic shared memory per block
};

// Blocks for `work` items of `per_block` each, at least 1 and at most 65535 so
// that grid-stride loops cover the rest (gridDim.x may be larger on every
// architecture since compute capability 3.0; 65535 blocks fill any GPU).
inline unsigned blocks_for(int64_t work, int64_t per_block) {
  const int64_t blocks = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

// Element-wise kernels: 256 threads per block, one element per thread per
// step of a grid-stride loop (Harris 2013, "CUDA Pro Tip: Write Flexible
// Kernels with Grid-Stride Loops"), so any n fits any grid.
inline constexpr unsigned kElementwiseBlock = 256;

inline LaunchShape elementwise_shape(int64_t n) { return {blocks_for(n, kElementwiseBlock), kElementwiseBlock, 0}; }

template <typename Ctx, typename F>
TESSERA_KERNEL_BODY void grid_stride(Ctx& ctx, int64_t n, F&& f) {
  const int64_t stride = static_cast<int64_t>(ctx.grid_dim()) * ctx.block_dim();
  for (int64_t i = static_cast<int64_t>(ctx.block_idx()) * ctx.block_dim() + ctx.thread_idx(); i < n; i += stride) f(i);
}

}  // namespace tessera::engine::kernels
