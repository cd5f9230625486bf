// Embedding launches (kernels/embedding.h).
#include "tessera/engine/cuda/embedding.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/embedding.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, int64_t rows, int64_t C, cpu::VocabSlice slice) {
  DeviceContext ctx;
  kernels::embedding_forward_body(ctx, out, tokens, wte, rows, C, slice);
}

template <typename T>
__global__ void position_embedding_forward_kernel(T* out, const T* wpe, int64_t rows, int64_t Tn, int64_t C, int64_t first_row,
                                                  planner::ContextSplit split) {
  DeviceContext ctx;
  kernels::position_embedding_forward_body(ctx, out, wpe, rows, Tn, C, first_row, split);
}

template <typename T>
__global__ void embedding_backward_kernel(T* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t C, cpu::VocabSlice slice) {
  DeviceContext ctx;
  kernels::embedding_backward_body(ctx, dwte, dout, tokens, rows, C, slice);
}

template <typename T>
__global__ void position_embedding_backward_kernel(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C, planner::ContextSplit split) {
  DeviceContext ctx;
  kernels::position_embedding_backward_body(ctx, dwpe, dout, B, Tn, C, split);
}

}  // namespace

template <typename T>
cudaError_t embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t rows, int64_t C, cpu::VocabSlice slice, cudaStream_t stream) {
  return launch(embedding_forward_kernel<T>, kernels::elementwise_shape(rows * C), stream, out, tokens, wte, rows, C, slice);
}
template <typename T>
cudaError_t position_embedding_forward(T* out, const T* wpe, int64_t rows, int64_t Tn, int64_t C, int64_t first_row, cudaStream_t stream,
                                       const planner::ContextSplit& split) {
  return launch(position_embedding_forward_kernel<T>, kernels::elementwise_shape(rows * C), stream, out, wpe, rows, Tn, C, first_row, split);
}
template <typename T>
cudaError_t embedding_backward(T* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t C, cpu::VocabSlice slice, cudaStream_t stream) {
  return launch(embedding_backward_kernel<T>, kernels::elementwise_shape(C), stream, dwte, dout, tokens, rows, C, slice);
}
template <typename T>
cudaError_t position_embedding_backward(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C, cudaStream_t stream,
                                        const planner::ContextSplit& split) {
  return launch(position_embedding_backward_kernel<T>, kernels::elementwise_shape(Tn * C), stream, dwpe, dout, B, Tn, C, split);
}

#define TESSERA_INSTANTIATE_EMBEDDING(T)                                                                                     \
  template cudaError_t embedding_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t, cpu::VocabSlice, cudaStream_t);  \
  template cudaError_t position_embedding_forward<T>(T*, const T*, int64_t, int64_t, int64_t, int64_t, cudaStream_t,           \
                                                     const planner::ContextSplit&);                                          \
  template cudaError_t embedding_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t, cpu::VocabSlice, cudaStream_t); \
  template cudaError_t position_embedding_backward<T>(T*, const T*, int64_t, int64_t, int64_t, cudaStream_t, const planner::ContextSplit&);
TESSERA_INSTANTIATE_EMBEDDING(float)
TESSERA_INSTANTIATE_EMBEDDING(bf16)
TESSERA_INSTANTIATE_EMBEDDING(fp16)

}  // namespace tessera::engine::cuda
