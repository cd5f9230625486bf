// GELU (tanh) and SwiGLU on the GPU (kernels/activation.h); arguments as in
// ops/activation.h, device pointers. Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename T>
cudaError_t gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t swiglu_forward(T* out, const T* gate, const T* up, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n, cudaStream_t stream);

}  // namespace tessera::engine::cuda
