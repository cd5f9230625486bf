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

template <typename T>
__global__ void add_rows_kernel(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first,
                                int64_t rows) {
  DeviceContext ctx;
  kernels::add_rows_body(ctx, dst, dst_stride, src, src_stride, width, B, Tn, first, rows);
}

}  // namespace

template <typename T>
cudaError_t add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows,
                     cudaStream_t stream) {
  return launch(add_rows_kernel<T>, kernels::elementwise_shape(B * rows * width), stream, dst, dst_stride, src, src_stride, width, B, Tn, first, rows);
}

template <typename T, typename In>
cudaError_t residual_add(T* out, const In* in, int64_t n, cudaStream_t stream) {
  return launch(residual_add_kernel<T, In>, kernels::elementwise_shape(n), stream, out, in, n);
}

template cudaError_t residual_add<float>(float*, const float*, int64_t, cudaStream_t);
template cudaError_t residual_add<bf16>(bf16*, const bf16*, int64_t, cudaStream_t);
template cudaError_t residual_add<fp16>(fp16*, const fp16*, int64_t, cudaStream_t);
template cudaError_t residual_add<float, bf16>(float*, const bf16*, int64_t, cudaStream_t);
template cudaError_t add_rows<bf16>(bf16*, int64_t, const bf16*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template cudaError_t add_rows<fp16>(fp16*, int64_t, const fp16*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace tessera::engine::cuda
