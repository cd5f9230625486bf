// Ring attention's buffers (model/ring_attention.h), from the planner's
// `ring_*` activation terms: two K/V blocks and two K/V-gradient blocks,
// (2, B, T, KVH·HS) each (K then V); one block's partial output or query
// gradient (B, T, NH·HS) with its log-sum-exp (B, NH, T); in 16-bit storage
// the running output in the compute type (B, T, NH·HS).
#pragma once

#include "tessera/engine/half.h"

namespace tessera::engine {

template <typename T>
struct RingBuffers {
  T* kv[2] = {nullptr, nullptr};
  T* kv_grad[2] = {nullptr, nullptr};
  T* partial = nullptr;
  compute_t<T>* partial_lse = nullptr;
  compute_t<T>* merged = nullptr;  // 16-bit storage only: the running output
};

}  // namespace tessera::engine
