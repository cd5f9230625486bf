// RoPE's launch (kernels/rope.h).
#include "tessera/engine/cuda/rope.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/rope.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void rope_kernel(T* x, int64_t B, int64_t Tn, int64_t H, int64_t HS, int64_t stride, int64_t rotary_dim, double theta, bool inverse,
                            planner::ContextSplit split) {
  DeviceContext ctx;
  kernels::rope_body(ctx, x, B, Tn, H, HS, stride, rotary_dim, theta, inverse, split);
}

}  // namespace

template <typename T>
cudaError_t rope_rotate(T* x, int64_t B, int64_t Tn, int64_t H, int64_t HS, int64_t stride, int64_t rotary_dim, double theta, bool inverse,
                        cudaStream_t stream, const planner::ContextSplit& split) {
  return launch(rope_kernel<T>, kernels::elementwise_shape(B * Tn * H * (rotary_dim / 2)), stream, x, B, Tn, H, HS, stride, rotary_dim, theta, inverse,
                split);
}

template cudaError_t rope_rotate<float>(float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool, cudaStream_t, const planner::ContextSplit&);
template cudaError_t rope_rotate<bf16>(bf16*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool, cudaStream_t, const planner::ContextSplit&);
template cudaError_t rope_rotate<fp16>(fp16*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool, cudaStream_t, const planner::ContextSplit&);

}  // namespace tessera::engine::cuda
