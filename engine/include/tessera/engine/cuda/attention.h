// Causal grouped-query attention on the GPU through cuDNN's fused
// scaled-dot-product (flash) attention, forward and backward, built with
// cuDNN 9's graph (backend) API: the CPU op's contract (ops/attention.h) in
// bf16 or fp16 — q (B, T, NH·HS) with row stride q_stride, k and v (B, T,
// KVH·HS) with kv_stride, out (B, T, NH·HS) contiguous — and its log-sum-exp
// per query row and head, lse (B, NH, T), in fp32: the softmax statistics
// the backward recomputes the probabilities from. Scores, softmax and the
// products' sums are fp32; the probabilities are rounded to the storage type
// before they multiply V, as in FlashAttention-2 on tensor cores.
// Ring attention's blocks (ops/attention.h's query_rows, key_rows, causal,
// dq_stride and dkv_stride; model/ring_blocks.h) run the same graphs: fewer
// query rows or keys than T, unmasked, their log-sum-exps at their rows of
// the (B, NH, T) statistics, rows T apart (cudnn-frontend's
// docs/operations/Attention.md at 0512390, "Important Notes on Support
// Surface": s_q and s_kv arbitrary, q, k, v, o, dq, dk, dv, do laid out
// independently, masking optional; it says nothing of the statistics'
// strides, which only a GPU run checks); a causal block is square, its mask
// top-left aligned.
//
// cuDNN's limits (cudnn-frontend's sdpa_support_surface.h for fp16/bf16 on
// Hopper): HS a multiple of 8 and at most 256; rows 16-byte aligned, i.e.
// q_stride and kv_stride multiples of 8. Plans are built once per shape and
// kept. Built only where CMake finds cuDNN (TESSERA_HAVE_CUDNN).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/half.h"
#include "tessera/engine/ops/attention.h"

namespace tessera::engine::cuda {

class Attention {
 public:
  // A cuDNN handle; an empty error() means ready. The workspace (the plans',
  // and the backward's fp32 dQ accumulator and row sums) comes from
  // `workspace`, booked under MemoryCategory::workspace, for work on its
  // default stream; the allocator must outlive this object.
  explicit Attention(CachingAllocator& workspace);
  ~Attention();
  Attention(const Attention&) = delete;
  Attention& operator=(const Attention&) = delete;
  const std::string& error() const { return error_; }

  // Why `s` cannot run through cuDNN's fused attention, in one line, or empty.
  static std::string unsupported(const cpu::AttentionShape& s);
  // Builds both cuDNN graphs for `s` up to their finalized operations, which
  // needs no device (the plan does), and returns what cuDNN refused, or empty:
  // the part of a launch that machines without a GPU can check.
  template <typename T>
  static std::string graphs_refused(const cpu::AttentionShape& s);

  // Device pointers; T is bf16 or fp16. Each returns an empty string, or
  // what cuDNN (or the shape check) refused, in one line.
  template <typename T>
  std::string forward(T* out, float* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s,
                      cudaStream_t stream);
  // Overwrites dq, dk, dv (the strides of q, k, v); out and lse from forward.
  template <typename T>
  std::string backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                       const float* lse, const cpu::AttentionShape& s, cudaStream_t stream);

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string error_;
};

}  // namespace tessera::engine::cuda
