// LayerNorm and RMSNorm on the GPU: the kernel bodies of kernels/norms.h
// launched on a stream. Arguments as in ops/layernorm.h (device pointers;
// statistics in fp32); backward accumulates (+=) into dinp, dweight and dbias
// and needs a device `workspace` of norm_backward_workspace_bytes(N, C).
// Each function returns the launch's error (cudaSuccess when it queued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tessera::engine::cuda {

size_t norm_backward_workspace_bytes(int64_t N, int64_t C);

template <typename T>
cudaError_t layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, float eps,
                              cudaStream_t stream);
template <typename T>
cudaError_t layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C, void* workspace, cudaStream_t stream);
template <typename T>
cudaError_t rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int64_t N, int64_t C, float eps, cudaStream_t stream);
template <typename T>
cudaError_t rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int64_t N, int64_t C,
                             void* workspace, cudaStream_t stream);

}  // namespace tessera::engine::cuda
