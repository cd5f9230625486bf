// The vocabulary-parallel cross-entropy's launches (kernels/vocab_parallel_cross_entropy.h).
#include "tessera/engine/cuda/vocab_parallel_cross_entropy.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/vocab_parallel_cross_entropy.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void vocab_row_max_kernel(float* row_max, const T* logits, int64_t N, int64_t V, int64_t valid) {
  DeviceContext ctx;
  kernels::vocab_row_max_body(ctx, row_max, logits, N, V, valid);
}

template <typename T>
__global__ void vocab_row_sum_exp_kernel(float* row_sum, const T* logits, const float* row_max, int64_t N, int64_t V, int64_t valid) {
  DeviceContext ctx;
  kernels::vocab_row_sum_exp_body(ctx, row_sum, logits, row_max, N, V, valid);
}

template <typename T>
__global__ void vocab_parallel_loss_kernel(float* losses, T* logits, const int32_t* targets, const float* row_max, const float* row_sum, int64_t N,
                                           int64_t V, cpu::VocabSlice slice, float dloss_scale, bool write_gradient) {
  DeviceContext ctx;
  kernels::vocab_parallel_loss_body(ctx, losses, logits, targets, row_max, row_sum, N, V, slice, dloss_scale, write_gradient);
}

}  // namespace

template <typename T>
cudaError_t vocab_row_max(float* row_max, const T* logits, int64_t N, int64_t V, int64_t valid, cudaStream_t stream) {
  return launch(vocab_row_max_kernel<T>, kernels::vocab_parallel_cross_entropy_shape(N), stream, row_max, logits, N, V, valid);
}

template <typename T>
cudaError_t vocab_row_sum_exp(float* row_sum, const T* logits, const float* row_max, int64_t N, int64_t V, int64_t valid, cudaStream_t stream) {
  return launch(vocab_row_sum_exp_kernel<T>, kernels::vocab_parallel_cross_entropy_shape(N), stream, row_sum, logits, row_max, N, V, valid);
}

template <typename T>
cudaError_t vocab_parallel_loss(float* losses, T* logits, const int32_t* targets, const float* row_max, const float* row_sum, int64_t N, int64_t V,
                                cpu::VocabSlice slice, float dloss_scale, bool write_gradient, cudaStream_t stream) {
  return launch(vocab_parallel_loss_kernel<T>, kernels::vocab_parallel_cross_entropy_shape(N), stream, losses, logits, targets, row_max, row_sum, N, V,
                slice, dloss_scale, write_gradient);
}

#define TESSERA_INSTANTIATE_VOCAB_PARALLEL_CROSS_ENTROPY(T)                                                                                                          \
  template cudaError_t vocab_row_max<T>(float*, const T*, int64_t, int64_t, int64_t, cudaStream_t);                                                     \
  template cudaError_t vocab_row_sum_exp<T>(float*, const T*, const float*, int64_t, int64_t, int64_t, cudaStream_t);                                   \
  template cudaError_t vocab_parallel_loss<T>(float*, T*, const int32_t*, const float*, const float*, int64_t, int64_t, cpu::VocabSlice, float, bool, \
                                              cudaStream_t);
TESSERA_INSTANTIATE_VOCAB_PARALLEL_CROSS_ENTROPY(float)
TESSERA_INSTANTIATE_VOCAB_PARALLEL_CROSS_ENTROPY(bf16)
TESSERA_INSTANTIATE_VOCAB_PARALLEL_CROSS_ENTROPY(fp16)

}  // namespace tessera::engine::cuda
