// The gradients' sum of squares and overflow flag on the GPU
// (kernels/sum_of_squares.h): writes *sum_of_squares (double) and *overflow
// (1: some gradient is inf or NaN) in device memory; needs a device
// `workspace` of sum_of_squares_workspace_bytes(n). Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tessera::engine::cuda {

size_t sum_of_squares_workspace_bytes(int64_t n);

template <typename G>
cudaError_t sum_of_squares(double* sum_of_squares, int32_t* overflow, const G* grads, int64_t n, double unscale, void* workspace, cudaStream_t stream);

}  // namespace tessera::engine::cuda
