// The casts' launch (kernels/casts.h).
#include "tessera/engine/cuda/casts.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/casts.h"

namespace tessera::engine::cuda {
namespace {

template <typename To, typename From>
__global__ void cast_kernel(To* out, const From* in, int64_t n) {
  DeviceContext ctx;
  kernels::cast_body(ctx, out, in, n);
}

}  // namespace

template <typename To, typename From>
cudaError_t cast(To* out, const From* in, int64_t n, cudaStream_t stream) {
  return launch(cast_kernel<To, From>, kernels::elementwise_shape(n), stream, out, in, n);
}

template cudaError_t cast<bf16, float>(bf16*, const float*, int64_t, cudaStream_t);
template cudaError_t cast<fp16, float>(fp16*, const float*, int64_t, cudaStream_t);
template cudaError_t cast<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template cudaError_t cast<float, fp16>(float*, const fp16*, int64_t, cudaStream_t);

}  // namespace tessera::engine::cuda
