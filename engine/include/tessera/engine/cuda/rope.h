// Rotary position embedding in place on the GPU (kernels/rope.h); arguments
// as in ops/rope.h's rope_rotate. Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tessera/planner/context_split.h"

namespace tessera::engine::cuda {

template <typename T>
cudaError_t rope_rotate(T* x, int64_t B, int64_t Tn, int64_t H, int64_t HS, int64_t stride, int64_t rotary_dim, double theta, bool inverse,
                        cudaStream_t stream, const planner::ContextSplit& split = {});

}  // namespace tessera::engine::cuda
