// Ring attention over the context-parallel ranks on the CPU; see
// ring_attention.h. The order of the work is model/ring_steps.h's; this file
// supplies its CPU operations.
#include "tessera/engine/model/ring_attention.h"

#include <algorithm>

#include "tessera/engine/model/ring_steps.h"
#include "tessera/engine/ops/attention_merge.h"
#include "tessera/engine/ops/residual.h"

namespace tessera::engine {
namespace {

template <typename T>
struct CpuRingOps {
  using W = compute_t<T>;
  comm::Communicator& group;
  const RingPosition& at;
  cpu::Workspace<W>& workspace;

  Status attention_forward(T* out, W* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s) {
    cpu::attention_forward(out, lse, q, k, v, s, workspace);
    return Status::success();
  }
  Status attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const W* lse,
                            const cpu::AttentionShape& s) {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, s, workspace);
    return Status::success();
  }
  Status merge(W* running, W* running_lse, const T* partial, const W* partial_lse, const cpu::MergeRows& rows) {
    cpu::attention_merge(running, running_lse, partial, partial_lse, rows);
    return Status::success();
  }
  Status add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows) {
    cpu::add_rows(dst, dst_stride, src, src_stride, width, B, Tn, first, rows);
    return Status::success();
  }
  // k and v (B, T rows kv_stride apart) into `block`: (B, T, KVH·HS) K, then V.
  Status pack(T* block, const T* k, const T* v, const cpu::AttentionShape& s) {
    const int64_t width = s.KVH * s.HS, rows = s.B * s.T;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(k + r * s.kv_stride, width, block + r * width);
      std::copy_n(v + r * s.kv_stride, width, block + (rows + r) * width);
    }
    return Status::success();
  }
  Status zero(T* x, int64_t n) {
    std::fill(x, x + n, T{});
    return Status::success();
  }
  Status widen(W* wide, const T* narrow_values, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) wide[i] = engine::widen(narrow_values[i]);
    return Status::success();
  }
  Status narrow(T* narrow_values, const W* wide, int64_t n) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) narrow_values[i] = engine::narrow<T>(wide[i]);
    return Status::success();
  }
  Status pass_on(const T* mine, T* theirs, int64_t count) {
    const int next = static_cast<int>((at.rank + 1) % at.cp), previous = static_cast<int>((at.rank + at.cp - 1) % at.cp);
    return group.send_recv(mine, next, theirs, previous, static_cast<size_t>(count));
  }
};

}  // namespace

template <typename T>
void ContextParallel::attention_forward(T* out, compute_t<T>* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s,
                                        const RingBuffers<T>& ring, cpu::Workspace<compute_t<T>>& workspace) {
  if (!status_.ok()) return;
  if (group_ == nullptr) {
    cpu::attention_forward(out, lse, q, k, v, s, workspace);
    return;
  }
  const RingPosition at{rank(), size()};
  CpuRingOps<T> ops{*group_, at, workspace};
  status_ = ring_forward(ops, at, out, lse, q, k, v, s, ring);
}

template <typename T>
void ContextParallel::attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const compute_t<T>* lse,
                                         const cpu::AttentionShape& s, const RingBuffers<T>& ring, cpu::Workspace<compute_t<T>>& workspace) {
  if (!status_.ok()) return;
  if (group_ == nullptr) {
    cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, s, workspace);
    return;
  }
  const RingPosition at{rank(), size()};
  CpuRingOps<T> ops{*group_, at, workspace};
  status_ = ring_backward(ops, at, dq, dk, dv, dout, q, k, v, out, lse, s, ring);
}

#define TESSERA_RING_ATTENTION(T)                                                                                                                           \
  template void ContextParallel::attention_forward<T>(T*, compute_t<T>*, const T*, const T*, const T*, const cpu::AttentionShape&, const RingBuffers<T>&, \
                                                      cpu::Workspace<compute_t<T>>&);                                                                    \
  template void ContextParallel::attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const compute_t<T>*,               \
                                                       const cpu::AttentionShape&, const RingBuffers<T>&, cpu::Workspace<compute_t<T>>&);
TESSERA_RING_ATTENTION(float)
TESSERA_RING_ATTENTION(double)
TESSERA_RING_ATTENTION(bf16)
TESSERA_RING_ATTENTION(fp16)
#undef TESSERA_RING_ATTENTION

}  // namespace tessera::engine
