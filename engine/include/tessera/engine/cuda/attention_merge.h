// Ring attention's log-sum-exp merge on the GPU (kernels/attention_merge.h):
// a block's partial output (bf16 or fp16, as cuDNN writes it) and its fp32
// log-sum-exp merged into the fp32 running output and log-sum-exp, over the
// rows `m` names. Device pointers; returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include "tessera/engine/ops/attention_merge_rows.h"

namespace tessera::engine::cuda {

template <typename T>
cudaError_t attention_merge(float* running, float* running_lse, const T* partial, const float* partial_lse, const cpu::MergeRows& m,
                            cudaStream_t stream);

}  // namespace tessera::engine::cuda
