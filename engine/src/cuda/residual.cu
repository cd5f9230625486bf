// The residual connection's launch (kernels/residual.h).
#include "tessera/engine/cuda/residual.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/residual.h"

namespace tessera::engine::cuda {
namespace {

template <typename T, typename In>
__global__ void residual_add_kernel(T* out, const In* in, int64_t n) {
  DeviceContext ctx;
  kernels::residual_add_body(ctx, out, in, n);
}

}  // namespace

template <typename T, typename In>
cudaError_t residual_add(T* out, const In* in, int64_t n, cudaStream_t stream) {
  return launch(residual_add_kernel<T, In>, kernels::elementwise_shape(n), stream, out, in, n);
}

template cudaError_t residual_add<float>(float*, const float*, int64_t, cudaStream_t);
template cudaError_t residual_add<bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template cudaError_t residual_add<fp16>(fp16*, const fp16*, int64_t, cudaStream_t);
template cudaError_t residual_add<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);

}  // namespace tessera::engine::cuda
