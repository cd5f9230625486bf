// Context parallelism's attention (Liu et al. 2023, "Ring Attention with
// Blockwise Transformers", arXiv:2310.01889; Transformer Engine's
// AttnFuncWithCPAndKVP2P, which Megatron-Core runs:
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
// NVIDIA/TransformerEngine@9c61cd7e5e0c93217ad38d4682568ff5dde4f08b). Each of
// the cp ranks holds two chunks of every sequence (planner/context_parallel.h:
// chunks r and 2·cp − 1 − r) and their queries, keys and values. Keys and
// values go round the ring in cp − 1 steps; at step i a rank holds the block
// of rank j = r − i (mod cp) and runs the FlashAttention kernel
// (ops/attention.h) on the part the causal mask leaves visible
// (model/ring_blocks.h, shared with the GPU ring), and merges each partial
// output into the running one by their log-sum-exps (out = Σ e^(Lᵢ − L) outᵢ,
// L = log Σ e^(Lᵢ); ops/attention_merge.h). Backward sends the blocks round
// again with their key and value gradients, each rank adding its share to the
// block it holds; a last step hands each block's gradient home. The probabilities
// come from the merged log-sum-exp, so each block's share is exact.
//
// The order of the work is model/ring_steps.h's, shared with the GPU ring;
// the buffers are RingBuffers (model/ring_buffers.h, the planner's `ring_*`
// terms, booked by the caller). The running output is kept in the compute
// type and rounded into `out` once after the last block (the partial outputs
// are rounded to storage, as flash kernels write them).
//
// Errors: the first communication failure is kept (status()) and later
// exchanges are skipped; the caller checks after each pass.
#pragma once

#include <cstdint>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/half.h"
#include "tessera/engine/model/ring_buffers.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/engine/ops/workspace.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine {

class ContextParallel {
 public:
  ContextParallel() = default;  // one rank: the whole sequence here
  explicit ContextParallel(comm::Communicator* group) : group_(group != nullptr && group->size() > 1 ? group : nullptr) {}

  int64_t size() const { return group_ != nullptr ? group_->size() : 1; }
  int64_t rank() const { return group_ != nullptr ? group_->rank() : 0; }
  planner::ContextSplit split() const { return planner::ContextSplit{size(), rank()}; }

  // As cpu::attention_forward and attention_backward, for this rank's T
  // tokens (shape.T, an even number under context parallelism) against every
  // key of their sequences that the causal mask shows them.
  template <typename T>
  void attention_forward(T* out, compute_t<T>* lse, const T* q, const T* k, const T* v, const cpu::AttentionShape& s, const RingBuffers<T>& ring,
                         cpu::Workspace<compute_t<T>>& workspace);
  template <typename T>
  void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const compute_t<T>* lse,
                          const cpu::AttentionShape& s, const RingBuffers<T>& ring, cpu::Workspace<compute_t<T>>& workspace);

  const Status& status() const { return status_; }

 private:
  comm::Communicator* group_ = nullptr;
  Status status_ = Status::success();
};

}  // namespace tessera::engine
