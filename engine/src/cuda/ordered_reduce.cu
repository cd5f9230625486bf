// The rank-order reduction's launch (kernels/ordered_reduce.h).
#include "tessera/engine/cuda/ordered_reduce.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/ordered_reduce.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void ordered_reduce_kernel(T* out, const T* slices, int n, int64_t count, bool take_max) {
  DeviceContext ctx;
  kernels::ordered_reduce_body(ctx, out, slices, n, count, take_max);
}

}  // namespace

template <typename T>
cudaError_t ordered_reduce(T* out, const T* slices, int n, int64_t count, bool take_max, cudaStream_t stream) {
  return launch(ordered_reduce_kernel<T>, kernels::elementwise_shape(count), stream, out, slices, n, count, take_max);
}

template cudaError_t ordered_reduce<float>(float*, const float*, int, int64_t, bool, cudaStream_t);
template cudaError_t ordered_reduce<double>(double*, const double*, int, int64_t, bool, cudaStream_t);
template cudaError_t ordered_reduce<bf16>(bf16*, const bf16*, int, int64_t, bool, cudaStream_t);
template cudaError_t ordered_reduce<fp16>(fp16*, const fp16*, int, int64_t, bool, cudaStream_t);

}  // namespace tessera::engine::cuda
