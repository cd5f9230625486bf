// GELU and SwiGLU launches (kernels/activation.h).
#include "tessera/engine/cuda/activation.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/activation.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, int64_t n) {
  DeviceContext ctx;
  kernels::gelu_forward_body(ctx, out, inp, n);
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, int64_t n) {
  DeviceContext ctx;
  kernels::gelu_backward_body(ctx, dinp, inp, dout, n);
}

template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* gate, const T* up, int64_t n) {
  DeviceContext ctx;
  kernels::swiglu_forward_body(ctx, out, gate, up, n);
}

template <typename T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
  DeviceContext ctx;
  kernels::swiglu_backward_body(ctx, dgate, dup, gate, up, dout, n);
}

}  // namespace

template <typename T>
cudaError_t gelu_forward(T* out, const T* inp, int64_t n, cudaStream_t stream) {
  return launch(gelu_forward_kernel<T>, kernels::elementwise_shape(n), stream, out, inp, n);
}
template <typename T>
cudaError_t gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n, cudaStream_t stream) {
  return launch(gelu_backward_kernel<T>, kernels::elementwise_shape(n), stream, dinp, inp, dout, n);
}
template <typename T>
cudaError_t swiglu_forward(T* out, const T* gate, const T* up, int64_t n, cudaStream_t stream) {
  return launch(swiglu_forward_kernel<T>, kernels::elementwise_shape(n), stream, out, gate, up, n);
}
template <typename T>
cudaError_t swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n, cudaStream_t stream) {
  return launch(swiglu_backward_kernel<T>, kernels::elementwise_shape(n), stream, dgate, dup, gate, up, dout, n);
}

#define TESSERA_INSTANTIATE_ACTIVATIONS(T)                                                          \
  template cudaError_t gelu_forward<T>(T*, const T*, int64_t, cudaStream_t);                        \
  template cudaError_t gelu_backward<T>(T*, const T*, const T*, int64_t, cudaStream_t);             \
  template cudaError_t swiglu_forward<T>(T*, const T*, const T*, int64_t, cudaStream_t);            \
  template cudaError_t swiglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, cudaStream_t);
TESSERA_INSTANTIATE_ACTIVATIONS(float)
TESSERA_INSTANTIATE_ACTIVATIONS(bf16)
TESSERA_INSTANTIATE_ACTIVATIONS(fp16)

}  // namespace tessera::engine::cuda
