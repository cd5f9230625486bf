// Ring attention on GPUs (cuda/ring_attention.h): model/ring_steps.h's work
// done with cuDNN, this backend's kernels and the group's send_recv.
#include "tessera/engine/cuda/ring_attention.h"

#include <cuda_runtime.h>

#include <string>

#include "cuda_errors.h"
#include "tessera/engine/cuda/attention_merge.h"
#include "tessera/engine/cuda/casts.h"
#include "tessera/engine/cuda/residual.h"
#include "tessera/engine/model/ring_steps.h"

namespace tessera::engine::cuda {
namespace {

Status attention_status(const std::string& error) {
  if (error.empty()) return Status::success();
  return make_error(ErrorCode::unsupported, error);
}

template <typename T>
struct GpuRingOps {
  Attention& attention;
  comm::Communicator& group;
  const RingPosition& at;
  cudaStream_t stream;

  Status attention_forward(T* out, float* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s) {
    return attention_status(attention.forward(out, lse, q, k, v, s, stream));
  }
  Status attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse,
                            const cpu::AttentionShape& s) {
    return attention_status(attention.backward(dq, dk, dv, dout, q, k, v, out, lse, s, stream));
  }
  Status merge(float* running, float* running_lse, const T* partial, const float* partial_lse, const cpu::MergeRows& rows) {
    return succeeded(attention_merge(running, running_lse, partial, partial_lse, rows, stream), "ring attention merge");
  }
  Status add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows) {
    return succeeded(cuda::add_rows(dst, dst_stride, src, src_stride, width, B, Tn, first, rows, stream), "ring attention add_rows");
  }
  // k and v (B·T rows kv_stride apart) into `block`, packed: two strided copies.
  Status pack(T* block, const T* k, const T* v, const cpu::AttentionShape& s) {
    const size_t width = static_cast<size_t>(s.KVH * s.HS) * sizeof(T), pitch = static_cast<size_t>(s.kv_stride) * sizeof(T);
    const size_t rows = static_cast<size_t>(s.B * s.T);
    Status st = succeeded(cudaMemcpy2DAsync(block, width, k, pitch, width, rows, cudaMemcpyDeviceToDevice, stream), "ring attention: packing K");
    if (!st) return st;
    return succeeded(cudaMemcpy2DAsync(block + rows * static_cast<size_t>(s.KVH * s.HS), width, v, pitch, width, rows, cudaMemcpyDeviceToDevice, stream),
                     "ring attention: packing V");
  }
  Status zero(T* x, int64_t n) {  // zero bits are 0.0 in bf16 and fp16
    return succeeded(cudaMemsetAsync(x, 0, static_cast<size_t>(n) * sizeof(T), stream), "ring attention: zeroing a gradient");
  }
  Status widen(float* wide, const T* narrow_values, int64_t n) {
    return succeeded(cast(wide, narrow_values, n, stream), "ring attention: widening the output");
  }
  Status narrow(T* narrow_values, const float* wide, int64_t n) {
    return succeeded(cast(narrow_values, wide, n, stream), "ring attention: rounding the output");
  }
  Status pass_on(const T* mine, T* theirs, int64_t count) {
    const int next = static_cast<int>((at.rank + 1) % at.cp), previous = static_cast<int>((at.rank + at.cp - 1) % at.cp);
    return group.send_recv(mine, next, theirs, previous, static_cast<size_t>(count));
  }
};

}  // namespace

RingAttention::RingAttention(Attention& attention, comm::Communicator* group, cudaStream_t stream)
    : attention_(attention), group_(group != nullptr && group->size() > 1 ? group : nullptr), stream_(stream) {}

template <typename T>
Status RingAttention::forward(T* out, float* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s, const RingBuffers<T>& ring) {
  if (group_ == nullptr) return attention_status(attention_.forward(out, lse, q, k, v, s, stream_));
  const RingPosition at{group_->rank(), group_->size()};
  GpuRingOps<T> ops{attention_, *group_, at, stream_};
  return ring_forward(ops, at, out, lse, q, k, v, s, ring);
}

template <typename T>
Status RingAttention::backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const float* lse,
                               const cpu::AttentionShape& s, const RingBuffers<T>& ring) {
  if (group_ == nullptr) return attention_status(attention_.backward(dq, dk, dv, dout, q, k, v, out, lse, s, stream_));
  const RingPosition at{group_->rank(), group_->size()};
  GpuRingOps<T> ops{attention_, *group_, at, stream_};
  return ring_backward(ops, at, dq, dk, dv, dout, q, k, v, out, lse, s, ring);
}

#define TESSERA_GPU_RING_ATTENTION(T)                                                                                                            \
  template Status RingAttention::forward<T>(T*, float*, const T*, const T*, const T*, const cpu::AttentionShape&, const RingBuffers<T>&); \
  template Status RingAttention::backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const float*,                 \
                                             const cpu::AttentionShape&, const RingBuffers<T>&);
TESSERA_GPU_RING_ATTENTION(bf16)
TESSERA_GPU_RING_ATTENTION(fp16)
#undef TESSERA_GPU_RING_ATTENTION

}  // namespace tessera::engine::cuda
