// AdamW's launch (kernels/adamw.h), for every parameter type with gradients
// in that type or, offloaded, in fp32.
#include "tessera/engine/cuda/adamw.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/adamw.h"

namespace tessera::engine::cuda {
namespace {

template <typename T, typename G>
__global__ void adamw_kernel(T* params, float* weights, float* m, float* v, const G* grads, int64_t n, float weight_decay, AdamWScalars scalars) {
  DeviceContext ctx;
  kernels::adamw_body(ctx, params, weights, m, v, grads, n, weight_decay, scalars);
}

}  // namespace

template <typename T, typename G>
cudaError_t adamw(T* params, float* weights, float* m, float* v, const G* grads, int64_t n, float weight_decay, AdamWScalars scalars, cudaStream_t stream) {
  return launch(adamw_kernel<T, G>, kernels::elementwise_shape(n), stream, params, weights, m, v, grads, n, weight_decay, scalars);
}

#define TESSERA_INSTANTIATE_ADAMW(T, G) \
  template cudaError_t adamw<T, G>(T*, float*, float*, float*, const G*, int64_t, float, AdamWScalars, cudaStream_t);
TESSERA_INSTANTIATE_ADAMW(float, float)
TESSERA_INSTANTIATE_ADAMW(bf16, bf16)
TESSERA_INSTANTIATE_ADAMW(bf16, float)
TESSERA_INSTANTIATE_ADAMW(fp16, fp16)
TESSERA_INSTANTIATE_ADAMW(fp16, float)

}  // namespace tessera::engine::cuda
