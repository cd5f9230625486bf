// AdamW over a range of flat buffers on the GPU (kernels/adamw.h): weights,
// m, v fp32 in place; params (16-bit copy) rounded from the weights, or null.
// Returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tessera/engine/adamw_step.h"

namespace tessera::engine::cuda {

template <typename T, typename G>
cudaError_t adamw(T* params, float* weights, float* m, float* v, const G* grads, int64_t n, float weight_decay, AdamWScalars scalars, cudaStream_t stream);

}  // namespace tessera::engine::cuda
