// The communicators' rank-order reduction on the GPU (kernels/ordered_reduce.h),
// which the NCCL backend runs on every rank's copies of its chunk. Returns the
// launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

// T: float, double, bf16, fp16.
template <typename T>
cudaError_t ordered_reduce(T* out, const T* slices, int n, int64_t count, bool take_max, cudaStream_t stream);

}  // namespace tessera::engine::cuda
