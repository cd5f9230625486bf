// Ring attention's merge launch (kernels/attention_merge.h).
#include "tessera/engine/cuda/attention_merge.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/attention_merge.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
__global__ void attention_merge_kernel(float* running, float* running_lse, const T* partial, const float* partial_lse, cpu::MergeRows m) {
  DeviceContext ctx;
  kernels::attention_merge_body(ctx, running, running_lse, partial, partial_lse, m);
}

}  // namespace

template <typename T>
cudaError_t attention_merge(float* running, float* running_lse, const T* partial, const float* partial_lse, const cpu::MergeRows& m,
                            cudaStream_t stream) {
  return launch(attention_merge_kernel<T>, kernels::attention_merge_shape(m), stream, running, running_lse, partial, partial_lse, m);
}

template cudaError_t attention_merge<bf16>(float*, float*, const bf16*, const float*, const cpu::MergeRows&, cudaStream_t);
template cudaError_t attention_merge<fp16>(float*, float*, const fp16*, const float*, const cpu::MergeRows&, cudaStream_t);

}  // namespace tessera::engine::cuda
