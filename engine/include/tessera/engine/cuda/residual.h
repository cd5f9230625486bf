// The residual connection out += in on the GPU (kernels/residual.h).
// Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename T>
cudaError_t residual_add(T* out, const T* in, int64_t n, cudaStream_t stream);

}  // namespace tessera::engine::cuda
