// The fused softmax + cross-entropy + gradient on the GPU (kernels/cross_entropy.h):
// losses (N) in fp32; the (N, V) logits, in T, become their gradient
// (p − onehot) · dloss_scale when write_gradient is true. Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessera::engine::cuda {

template <typename T>
cudaError_t fused_cross_entropy(float* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t valid, float dloss_scale,
                                bool write_gradient, cudaStream_t stream);

}  // namespace tessera::engine::cuda
