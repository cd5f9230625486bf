// Casts between fp32 and bf16/fp16 on the GPU (kernels/casts.h), rounding
// to nearest even. Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename To, typename From>
cudaError_t cast(To* out, const From* in, int64_t n, cudaStream_t stream);

}  // namespace tessera::engine::cuda
