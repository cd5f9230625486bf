// Which part of each key/value block a rank's queries see in ring attention
// (model/ring_attention.h), for the CPU ring and the GPU ring alike. Rank r
// holds chunks r and 2·cp − 1 − r of each sequence (planner/context_parallel.h),
// T local tokens; at step i it holds the block of rank j = r − i (mod cp), and
// the causal mask leaves visible:
//   i = 0 (j = r): its own tokens, causally (local order is global order);
//   j < r: every query against the block's first chunk, unmasked;
//   j > r: the second chunk's queries against the whole block, unmasked.
// Worked example, cp 2, T = 8 (chunks of 4): rank 0 at step 1 holds rank 1's
// block (global tokens 4-11): queries 4-7 (global 12-15) see all 8 keys;
// rank 1 at step 1 holds rank 0's (0-3, 12-15): queries 0-7 see keys 0-3.
#pragma once

#include <cstdint>

#include "tessera/engine/ops/attention.h"

namespace tessera::engine {

struct RingBlock {
  int64_t source = 0;                                 // the rank whose keys and values these are
  int64_t first_query = 0, query_rows = 0, key_rows = 0;  // queries [first, first + rows) of each sample see keys [0, key_rows)
  bool causal = false;
};

inline RingBlock ring_block(int64_t step, int64_t rank, int64_t cp, int64_t T) {
  const int64_t source = (rank + cp - step % cp) % cp, chunk = T / 2;
  if (source == rank) return {source, 0, T, T, true};
  if (source < rank) return {source, 0, T, chunk, false};
  return {source, chunk, chunk, T, false};
}

// The attention kernel's shape for that part of a block received over the
// ring, whose keys and values (and their gradients) are packed KVH·HS apart
// and whose partial query gradient is NH·HS apart; q keeps its stride.
inline cpu::AttentionShape received_block_shape(cpu::AttentionShape s, const RingBlock& b) {
  s.kv_stride = s.KVH * s.HS;
  s.query_rows = b.query_rows;
  s.key_rows = b.key_rows;
  s.causal = b.causal;
  s.dq_stride = s.NH * s.HS;
  s.dkv_stride = s.kv_stride;
  return s;
}

}  // namespace tessera::engine
