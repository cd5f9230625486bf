// Token and position embeddings on the GPU (kernels/embedding.h); arguments
// as in ops/embedding.h, device pointers; backward accumulates (+=).
// Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tessera/engine/ops/vocab_slice.h"
#include "tessera/planner/context_split.h"

namespace tessera::engine::cuda {

template <typename T>
cudaError_t embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t rows, int64_t C, cpu::VocabSlice slice, cudaStream_t stream);
template <typename T>
cudaError_t position_embedding_forward(T* out, const T* wpe, int64_t rows, int64_t Tn, int64_t C, int64_t first_row, cudaStream_t stream,
                                       const planner::ContextSplit& split = {});
template <typename T>
cudaError_t embedding_backward(T* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t C, cpu::VocabSlice slice, cudaStream_t stream);
template <typename T>
cudaError_t position_embedding_backward(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C, cudaStream_t stream,
                                        const planner::ContextSplit& split = {});

}  // namespace tessera::engine::cuda
