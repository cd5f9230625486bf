// The residual connection out += in on the GPU (kernels/residual.h); fp32 += bf16 too.
// Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename T, typename In = T>
cudaError_t residual_add(T* out, const In* in, int64_t n, cudaStream_t stream);

// ops/residual.h's add_rows (kernels/residual.h); T is bf16 or fp16.
template <typename T>
cudaError_t add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows,
                     cudaStream_t stream);

}  // namespace tessera::engine::cuda
