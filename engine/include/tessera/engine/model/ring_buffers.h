// Ring attention's buffers (model/ring_attention.h), from the planner's
// `ring_*` activation terms: two K/V blocks and two K/V-gradient blocks,
// (2, B, T, KVH·HS) each (K then V); one block's partial output or query
// gradient (B, T, NH·HS) with its log-sum-exp (B, NH, T); in 16-bit storage
// the running output in the compute type (B, T, NH·HS).
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/planner/activations.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine {

template <typename T>
struct RingBuffers {
  T* kv[2] = {nullptr, nullptr};
  T* kv_grad[2] = {nullptr, nullptr};
  T* partial = nullptr;
  compute_t<T>* partial_lse = nullptr;
  compute_t<T>* merged = nullptr;  // 16-bit storage only: the running output
};

// The elements of one K/V block of a rank whose activations have `shape`
// (B sequences of its seq_len tokens, its tp rank's heads) in a model whose
// keys and values are kv_width wide in all: 2 · B · T · kv_width/tp, what the
// ring sends each step (planner::ring_block_elements); 0 without context
// parallelism. The CPU model and the GPU step carve their blocks by it.
inline int64_t ring_kv_block(const planner::ActivationShape& shape, int64_t kv_width) {
  return shape.cp > 1 ? planner::ring_block_elements(shape.micro_batch_size, shape.seq_len, kv_width, shape.tp) : 0;
}

// The buffers from the planner's terms, found by name: `narrow(name)` gives a
// storage-type term (T*), `wide(name)` a compute-type one; `kv_block` is the
// elements of one K/V block (ring_kv_block). The CPU model and the GPU
// step each look the terms up in their own activation memory.
template <typename T, typename Narrow, typename Wide>
RingBuffers<T> ring_buffers_from(int64_t kv_block, Narrow narrow, Wide wide) {
  T* kv = narrow("ring_kv");
  T* kv_grad = narrow("ring_kv_grad");
  return RingBuffers<T>{{kv, kv + kv_block}, {kv_grad, kv_grad + kv_block}, narrow("ring_partial"), wide("ring_partial_lse"), wide("ring_merged_output")};
}

}  // namespace tessera::engine
