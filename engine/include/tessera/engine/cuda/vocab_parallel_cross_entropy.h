// The vocabulary-parallel fused cross-entropy's three passes on the GPU
// (kernels/vocab_parallel_cross_entropy.h), launched one at a time so that the
// caller all-reduces each pass's N fp32 values over the tensor-parallel group
// between them: row_max (then max), row_sum (then sum), losses (then sum).
// The (N, V) logits, in T, hold this rank's share of the vocabulary (`slice`:
// which classes its first columns are) and become their gradient
// (p − onehot) · dloss_scale when write_gradient is true. Return the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tessera/engine/ops/vocab_slice.h"

namespace tessera::engine::cuda {

template <typename T>
cudaError_t vocab_row_max(float* row_max, const T* logits, int64_t N, int64_t V, int64_t valid, cudaStream_t stream);
template <typename T>
cudaError_t vocab_row_sum_exp(float* row_sum, const T* logits, const float* row_max, int64_t N, int64_t V, int64_t valid, cudaStream_t stream);
template <typename T>
cudaError_t vocab_parallel_loss(float* losses, T* logits, const int32_t* targets, const float* row_max, const float* row_sum, int64_t N, int64_t V,
                                cpu::VocabSlice slice, float dloss_scale, bool write_gradient, cudaStream_t stream);

}  // namespace tessera::engine::cuda
