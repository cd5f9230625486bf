// The order of ring attention's work (model/ring_attention.h), written once
// for the CPU ring (model/ring_attention.cpp) and the GPU ring
// (cuda/ring_attention.h), so that what is sent where, into which buffer, and
// which query rows meet which keys (model/ring_blocks.h) is the same on both
// and the CPU tests check it. `Ops` does the work on its device, each call
// returning a Status:
//   attention_forward(out, lse, q, k, v, shape), attention_backward(dq, dk,
//     dv, dout, q, k, v, out, lse, shape)     as ops/attention.h
//   merge(running, running_lse, partial, partial_lse, rows)   as ops/attention_merge.h
//   add_rows(dst, dst_stride, src, src_stride, width, B, T, first, rows)
//     dst rows [first, first + rows) of each sample += src's
//   pack(block, k, v, shape)       k then v into (2, B, T, KVH·HS)
//   zero(x, n), widen(wide, narrow, n), narrow(narrow, wide, n)
//   pass_on(mine, theirs, n)       send to rank + 1, receive from rank − 1
// Buffers are RingBuffers' (ring_attention.h), all on the Ops' device.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/engine/half.h"
#include "tessera/engine/model/ring_blocks.h"
#include "tessera/engine/model/ring_buffers.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/engine/ops/attention_merge_rows.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

struct RingPosition {
  int64_t rank = 0, cp = 1;
};

// The running output is kept in the compute type and rounded once after the
// last block: `out` itself in fp32 or double, else ring.merged.
template <typename T, typename Ops>
Status ring_forward(Ops& ops, const RingPosition& at, T* out, compute_t<T>* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s,
                    const RingBuffers<T>& ring) {
  if (Status st = ops.attention_forward(out, lse, q, k, v, s); !st || at.cp == 1) return st;  // this rank's own block
  const int64_t block = s.B * s.T * s.KVH * s.HS, width = s.NH * s.HS, outputs = s.B * s.T * width;
  compute_t<T>* running = nullptr;
  if constexpr (std::is_same_v<T, compute_t<T>>) {
    running = out;
  } else {
    running = ring.merged;
    if (Status st = ops.widen(running, out, outputs); !st) return st;
  }
  if (Status st = ops.pack(ring.kv[0], k, v, s); !st) return st;
  int held = 0;
  for (int64_t step = 1; step < at.cp; ++step) {
    if (Status st = ops.pass_on(ring.kv[held], ring.kv[1 - held], 2 * block); !st) return st;
    held = 1 - held;
    const RingBlock part = ring_block(step, at.rank, at.cp, s.T);
    const T* keys = ring.kv[held];
    if (Status st = ops.attention_forward(ring.partial + part.first_query * width, ring.partial_lse + part.first_query,
                                          q + part.first_query * s.q_stride, keys, keys + block, received_block_shape(s, part));
        !st) {
      return st;
    }
    if (Status st = ops.merge(running, lse, ring.partial, ring.partial_lse, cpu::MergeRows{s.B, s.T, s.NH, s.HS, part.first_query, part.query_rows});
        !st) {
      return st;
    }
  }
  if constexpr (!std::is_same_v<T, compute_t<T>>) return ops.narrow(out, running, outputs);
  return Status::success();
}

// Each block's key/value gradient accumulates as it travels: rank j + 1 (which
// first holds block j after its owner) starts it, each later rank adds its
// share and passes it on with the next block, and the last hands it home, where
// the owner's own share waits in dk, dv: cp − 1 hops, as a ring
// reduce-scatter's (the simulator's cost, simulate.cpp). Each block's
// probabilities come from the merged log-sum-exp, so its share is exact.
// dq and the travelling dk, dv add up in the storage type, as Transformer
// Engine's ring does outside FP8 (AttnFuncWithCPAndKVP2P.backward: dq_buffer
// like q, the P2P buffers in kv's dtype, add_ at each step; TransformerEngine
// d0067d0d, pytorch/attention/dot_product_attention/context_parallel.py), so
// the bytes on the wire are the forward's.
template <typename T, typename Ops>
Status ring_backward(Ops& ops, const RingPosition& at, T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                     const compute_t<T>* lse, const cpu::AttentionShape& s, const RingBuffers<T>& ring) {
  if (Status st = ops.attention_backward(dq, dk, dv, dout, q, k, v, out, lse, s); !st || at.cp == 1) return st;  // this rank's own block
  const int64_t width = s.KVH * s.HS, block = s.B * s.T * width, q_width = s.NH * s.HS;
  if (Status st = ops.pack(ring.kv[0], k, v, s); !st) return st;
  int held = 0, travelling = 0;  // which kv and which kv_grad buffer hold the block at hand and its gradient
  for (int64_t step = 1; step < at.cp; ++step) {
    if (Status st = ops.pass_on(ring.kv[held], ring.kv[1 - held], 2 * block); !st) return st;
    if (step > 1) {
      if (Status st = ops.pass_on(ring.kv_grad[travelling], ring.kv_grad[1 - travelling], 2 * block); !st) return st;
      travelling = 1 - travelling;
    }
    held = 1 - held;
    const RingBlock part = ring_block(step, at.rank, at.cp, s.T);
    const int64_t first = part.first_query;
    const T* keys = ring.kv[held];
    T* gradient = ring.kv_grad[travelling];
    T* share = ring.kv_grad[1 - travelling];  // free: the gradient it held has gone on
    Status st = ops.attention_backward(ring.partial + first * q_width, share, share + block, dout + first * q_width, q + first * s.q_stride, keys,
                                       keys + block, out + first * q_width, lse + first, received_block_shape(s, part));
    if (st) st = ops.add_rows(dq, s.q_stride, ring.partial, q_width, q_width, s.B, s.T, first, part.query_rows);
    if (st && step == 1) st = ops.zero(gradient, 2 * block);
    if (st) st = ops.add_rows(gradient, width, share, width, width, s.B, s.T, 0, part.key_rows);
    if (st) st = ops.add_rows(gradient + block, width, share + block, width, width, s.B, s.T, 0, part.key_rows);
    if (!st) return st;
  }
  if (Status st = ops.pass_on(ring.kv_grad[travelling], ring.kv_grad[1 - travelling], 2 * block); !st) return st;  // each block's gradient home
  const T* home = ring.kv_grad[1 - travelling];
  if (Status st = ops.add_rows(dk, s.kv_stride, home, width, width, s.B, s.T, 0, s.T); !st) return st;
  return ops.add_rows(dv, s.kv_stride, home + block, width, width, s.B, s.T, 0, s.T);
}

}  // namespace tessera::engine
