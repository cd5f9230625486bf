// LayerNorm and RMSNorm launches: kernels/norms.h's bodies in __global__
// wrappers, shapes from the same header (the emulator tests use them too).
#include "tessera/engine/cuda/norms.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/norms.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C,
                                         float eps) {
  DeviceContext ctx;
  kernels::layernorm_forward_body(ctx, out, mean, rstd, inp, weight, bias, N, C, eps);
}

template <typename T>
__global__ void layernorm_backward_input_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* mean, const float* rstd,
                                                int64_t N, int64_t C) {
  DeviceContext ctx;
  kernels::layernorm_backward_input_body(ctx, dinp, dout, inp, weight, mean, rstd, N, C);
}

template <typename T>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int64_t N, int64_t C, float eps) {
  DeviceContext ctx;
  kernels::rmsnorm_forward_body(ctx, out, rstd, inp, weight, N, C, eps);
}

template <typename T>
__global__ void rmsnorm_backward_input_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const float* rstd, int64_t N, int64_t C) {
  DeviceContext ctx;
  kernels::rmsnorm_backward_input_body(ctx, dinp, dout, inp, weight, rstd, N, C);
}

template <typename T>
__global__ void norm_param_partials_kernel(float* partial_dw, float* partial_db, const T* dout, const T* inp, const float* mean, const float* rstd,
                                           int64_t N, int64_t C) {
  DeviceContext ctx;
  kernels::norm_param_partials_body(ctx, partial_dw, partial_db, dout, inp, mean, rstd, N, C);
}

template <typename T>
__global__ void column_sums_accumulate_kernel(T* grad, const float* partials, int64_t chunks, int64_t C) {
  DeviceContext ctx;
  kernels::column_sums_accumulate_body(ctx, grad, partials, chunks, C);
}

// The parameter gradients of either norm (mean null: RMSNorm; dbias null: none).
template <typename T>
cudaError_t norm_param_grads(T* dweight, T* dbias, const T* dout, const T* inp, const float* mean, const float* rstd, int64_t N, int64_t C,
                             void* workspace, cudaStream_t stream) {
  const int64_t chunks = kernels::norm_chunks(N);
  float* partial_dw = static_cast<float*>(workspace);
  float* partial_db = dbias ? partial_dw + chunks * C : nullptr;
  cudaError_t error = launch(norm_param_partials_kernel<T>, kernels::norm_partials_shape(N, C), stream, partial_dw, partial_db, dout, inp, mean, rstd, N, C);
  if (error == cudaSuccess) error = launch(column_sums_accumulate_kernel<T>, kernels::norm_columns_shape(C), stream, dweight, partial_dw, chunks, C);
  if (error == cudaSuccess && dbias) {
    error = launch(column_sums_accumulate_kernel<T>, kernels::norm_columns_shape(C), stream, dbias, static_cast<const float*>(partial_db), chunks, C);
  }
  return error;
}

}  // namespace

size_t norm_backward_workspace_bytes(int64_t N, int64_t C) { return static_cast<size_t>(2 * kernels::norm_chunks(N) * C) * sizeof(float); }

template <typename T>
cudaError_t layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, float eps,
                              cudaStream_t stream) {
  return launch(layernorm_forward_kernel<T>, kernels::norm_rows_shape(N), stream, out, mean, rstd, inp, weight, bias, N, C, eps);
}

template <typename T>
cudaError_t layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const float* mean, const float* rstd,
                               int64_t N, int64_t C, void* workspace, cudaStream_t stream) {
  const cudaError_t error = launch(layernorm_backward_input_kernel<T>, kernels::norm_rows_shape(N), stream, dinp, dout, inp, weight, mean, rstd, N, C);
  return error != cudaSuccess ? error : norm_param_grads(dweight, dbias, dout, inp, mean, rstd, N, C, workspace, stream);
}

template <typename T>
cudaError_t rmsnorm_forward(T* out, float* rstd, const T* inp, const T* weight, int64_t N, int64_t C, float eps, cudaStream_t stream) {
  return launch(rmsnorm_forward_kernel<T>, kernels::norm_rows_shape(N), stream, out, rstd, inp, weight, N, C, eps);
}

template <typename T>
cudaError_t rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const float* rstd, int64_t N, int64_t C,
                             void* workspace, cudaStream_t stream) {
  const cudaError_t error = launch(rmsnorm_backward_input_kernel<T>, kernels::norm_rows_shape(N), stream, dinp, dout, inp, weight, rstd, N, C);
  return error != cudaSuccess ? error
                              : norm_param_grads(dweight, static_cast<T*>(nullptr), dout, inp, static_cast<const float*>(nullptr), rstd, N, C, workspace, stream);
}

#define TESSERA_INSTANTIATE_NORMS(T)                                                                                                               \
  template cudaError_t layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int64_t, int64_t, float, cudaStream_t);              \
  template cudaError_t layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const float*, const float*, int64_t, int64_t, void*,        \
                                             cudaStream_t);                                                                                       \
  template cudaError_t rmsnorm_forward<T>(T*, float*, const T*, const T*, int64_t, int64_t, float, cudaStream_t);                                  \
  template cudaError_t rmsnorm_backward<T>(T*, T*, const T*, const T*, const T*, const float*, int64_t, int64_t, void*, cudaStream_t);
TESSERA_INSTANTIATE_NORMS(float)
TESSERA_INSTANTIATE_NORMS(bf16)
TESSERA_INSTANTIATE_NORMS(fp16)

}  // namespace tessera::engine::cuda
