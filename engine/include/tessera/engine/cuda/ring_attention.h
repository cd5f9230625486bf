// Context parallelism's ring attention on GPUs, one rank per GPU: the CPU
// ring's order of work (model/ring_steps.h: the same blocks, buffers and
// sends, planner::ring_sends' count) with cuDNN's fused attention on each
// block (cuda/attention.h, its softmax statistics kept for the merge and for
// backward), the log-sum-exp merge into the fp32 running output
// (cuda/attention_merge.h), the gradients' strided sums (cuda/residual.h's
// add_rows), and the context group's send_recv (NCCL's, comm/nccl.h, which
// waits for the work queued on the stream before it sends). Backward gives
// each block cuDNN's SDPA backward the merged output, its gradient and the
// merged log-sum-exp, accumulates dq here and sends each block's dk, dv home.
// Device pointers; T is bf16 or fp16; RingBuffers (model/ring_buffers.h) on
// the device, from the planner's ring_* terms; the group any communicator on device
// memory (NCCL's). Built where cuDNN is (TESSERA_HAVE_CUDNN).
// Never run on a GPU yet: tests/cuda/ring_attention_gpu_test.cpp is
// tools/gpu-check's.
#pragma once

#include <cuda_runtime_api.h>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/model/ring_buffers.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/planner/status.h"

namespace tessera::engine::cuda {

class RingAttention {
 public:
  // `group`: the context-parallel group (null or one rank: attention of the
  // local tokens alone); `attention` and `group` must outlive this object.
  RingAttention(Attention& attention, comm::Communicator* group, cudaStream_t stream);

  // As model/ring_attention.h's ContextParallel::attention_forward and attention_backward.
  template <typename T>
  Status forward(T* out, float* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s, const RingBuffers<T>& ring);
  template <typename T>
  Status backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse,
                  const cpu::AttentionShape& s, const RingBuffers<T>& ring);

 private:
  Attention& attention_;
  comm::Communicator* group_;
  cudaStream_t stream_;
};

}  // namespace tessera::engine::cuda
