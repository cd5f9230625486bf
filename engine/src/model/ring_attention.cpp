// Ring attention over the context-parallel ranks; see ring_attention.h.
#include "tessera/engine/model/ring_attention.h"

#include <algorithm>
#include <type_traits>

#include "tessera/engine/model/ring_blocks.h"
#include "tessera/engine/ops/attention_merge.h"

namespace tessera::engine {
namespace {

// k and v (B, T rows kv_stride apart) into `block`: (B, T, KVH·HS) K, then V.
template <typename T>
void pack_keys_values(T* block, const T* k, const T* v, const cpu::AttentionShape& s) {
  const int64_t width = s.KVH * s.HS, rows = s.B * s.T;
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(k + r * s.kv_stride, width, block + r * width);
    std::copy_n(v + r * s.kv_stride, width, block + (rows + r) * width);
  }
}

// dst rows [first, first + rows) of each sample += src's, row widths `width`, strides as given.
template <typename T>
void add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows) {
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = first; t < first + rows; ++t) {
      T* d = dst + (b * Tn + t) * dst_stride;
      const T* x = src + (b * Tn + t) * src_stride;
      for (int64_t i = 0; i < width; ++i) d[i] = narrow<T>(widen(d[i]) + widen(x[i]));
    }
  }
}

// The ring's running output, in the compute type so that it is rounded once,
// after the last block: `out` itself in fp32 or double, else ring.merged,
// which starts as the n values of this rank's own block.
template <typename T>
compute_t<T>* begin_running_output(T* out, const RingBuffers<T>& ring, int64_t n) {
  if constexpr (std::is_same_v<T, compute_t<T>>) {
    return out;
  } else {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) ring.merged[i] = widen(out[i]);
    return ring.merged;
  }
}

template <typename T>
void end_running_output(T* out, const compute_t<T>* running, int64_t n) {
  if constexpr (!std::is_same_v<T, compute_t<T>>) {
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(running[i]);
  }
}

}  // namespace

template <typename T>
void ContextParallel::pass_on(const T* mine, T* theirs, int64_t count) {
  if (!status_.ok()) return;
  const int next = static_cast<int>((rank() + 1) % size()), previous = static_cast<int>((rank() + size() - 1) % size());
  status_ = group_->send_recv(mine, next, theirs, previous, static_cast<size_t>(count));
}

template <typename T>
void ContextParallel::attention_forward(T* out, compute_t<T>* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s,
                                        const RingBuffers<T>& ring, cpu::Workspace<compute_t<T>>& workspace) {
  cpu::attention_forward(out, lse, q, k, v, s, workspace);  // this rank's own block
  if (group_ == nullptr) return;
  const int64_t block = s.B * s.T * s.KVH * s.HS, width = s.NH * s.HS;
  compute_t<T>* running = begin_running_output(out, ring, s.B * s.T * width);
  pack_keys_values(ring.kv[0], k, v, s);
  int held = 0;
  for (int64_t step = 1; step < size(); ++step) {
    pass_on(ring.kv[held], ring.kv[1 - held], 2 * block);
    if (!status_.ok()) return;
    held = 1 - held;
    const RingBlock part = ring_block(step, rank(), size(), s.T);
    const T* keys = ring.kv[held];
    cpu::attention_forward(ring.partial + part.first_query * width, ring.partial_lse + part.first_query, q + part.first_query * s.q_stride, keys,
                           keys + block, received_block_shape(s, part), workspace);
    cpu::attention_merge(running, lse, ring.partial, ring.partial_lse, cpu::MergeRows{s.B, s.T, s.NH, s.HS, part.first_query, part.query_rows});
  }
  end_running_output(out, running, s.B * s.T * width);
}

// Each block's key/value gradient accumulates as it travels: rank j + 1 (which
// first holds block j after its owner) starts it, each later rank adds its
// share and passes it on with the next block, and the last hands it home, where
// the owner's own share waits in dk, dv: cp − 1 hops, as a ring
// reduce-scatter's (the simulator's cost, simulate.cpp).
template <typename T>
void ContextParallel::attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const compute_t<T>* lse,
                                         const cpu::AttentionShape& s, const RingBuffers<T>& ring, cpu::Workspace<compute_t<T>>& workspace) {
  cpu::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, s, workspace);  // this rank's own block
  if (group_ == nullptr) return;
  const int64_t width = s.KVH * s.HS, block = s.B * s.T * width, q_width = s.NH * s.HS;
  pack_keys_values(ring.kv[0], k, v, s);
  int held = 0, travelling = 0;  // which kv and which kv_grad buffer hold the block at hand and its gradient
  for (int64_t step = 1; step < size(); ++step) {
    pass_on(ring.kv[held], ring.kv[1 - held], 2 * block);
    if (step > 1) pass_on(ring.kv_grad[travelling], ring.kv_grad[1 - travelling], 2 * block);
    if (!status_.ok()) return;
    held = 1 - held;
    if (step > 1) travelling = 1 - travelling;
    const RingBlock part = ring_block(step, rank(), size(), s.T);
    const int64_t first = part.first_query;
    const T* keys = ring.kv[held];
    T* gradient = ring.kv_grad[travelling];
    T* share = ring.kv_grad[1 - travelling];  // free: the gradient it held has gone on
    cpu::attention_backward(ring.partial + first * q_width, share, share + block, dout + first * q_width, q + first * s.q_stride, keys, keys + block,
                            out + first * q_width, lse + first, received_block_shape(s, part), workspace);
    add_rows(dq, s.q_stride, ring.partial, q_width, q_width, s.B, s.T, first, part.query_rows);
    if (step == 1) std::fill(gradient, gradient + 2 * block, T{});
    add_rows(gradient, width, share, width, width, s.B, s.T, 0, part.key_rows);
    add_rows(gradient + block, width, share + block, width, width, s.B, s.T, 0, part.key_rows);
  }
  pass_on(ring.kv_grad[travelling], ring.kv_grad[1 - travelling], 2 * block);  // each block's gradient home
  if (!status_.ok()) return;
  const T* home = ring.kv_grad[1 - travelling];
  add_rows(dk, s.kv_stride, home, width, width, s.B, s.T, 0, s.T);
  add_rows(dv, s.kv_stride, home + block, width, width, s.B, s.T, 0, s.T);
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
