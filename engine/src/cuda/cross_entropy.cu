// The fused classifier's launch (kernels/cross_entropy.h).
#include "tessera/engine/cuda/cross_entropy.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/cross_entropy.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void fused_cross_entropy_kernel(float* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t valid, float dloss_scale,
                                           bool write_gradient) {
  DeviceContext ctx;
  kernels::fused_cross_entropy_body(ctx, losses, logits, targets, N, V, valid, dloss_scale, write_gradient);
}

}  // namespace

template <typename T>
cudaError_t fused_cross_entropy(float* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t valid, float dloss_scale,
                                bool write_gradient, cudaStream_t stream) {
  return launch(fused_cross_entropy_kernel<T>, kernels::cross_entropy_shape(N), stream, losses, logits, targets, N, V, valid, dloss_scale, write_gradient);
}

template cudaError_t fused_cross_entropy<float>(float*, float*, const int32_t*, int64_t, int64_t, int64_t, float, bool, cudaStream_t);
template cudaError_t fused_cross_entropy<bf16>(float*, bf16*, const int32_t*, int64_t, int64_t, int64_t, float, bool, cudaStream_t);
template cudaError_t fused_cross_entropy<fp16>(float*, fp16*, const int32_t*, int64_t, int64_t, int64_t, float, bool, cudaStream_t);

}  // namespace tessera::engine::cuda
