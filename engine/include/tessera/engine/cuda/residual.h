// The residual connection out += in on the GPU (kernels/residual.h); fp32 += bf16 too.
// Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename T, typename In = T>
cudaError_t residual_add(T* out, const In* in, int64_t n, cudaStream_t stream);

}  // namespace tessera::engine::cuda
