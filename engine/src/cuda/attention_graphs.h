// The two cuDNN graphs of causal grouped-query attention (forward, and
// backward from the forward's log-sum-exp), in the engine's layout
// (ops/attention.h: q, k, v rows of a token `q_stride`/`kv_stride` apart, out
// contiguous, lse (B, NH, T) fp32). Each graph is the chain of matmul,
// pointwise and reduction operations that cuDNN's runtime fuses into one
// flash-attention kernel: the composite graphs cudnn-frontend builds for
// scaled-dot-product attention on cuDNN 9 (include/cudnn_frontend/node/
// scaled_dot_product_flash_attention.h, CompositeSDPANode and
// CompositeSDPABackwardNode; softmax.h; diagonal_band_mask.h for the causal
// mask; github.com/NVIDIA/cudnn-frontend at 3929da2), with the same
// operations, tensor types and layouts, written here against the backend API.
#pragma once

#include "cudnn_descriptors.h"
#include "tessera/engine/ops/attention.h"

namespace tessera::engine::cuda::attention_graphs {

// The caller's tensors in the variant packs.
enum Uid : int64_t {
  q = 1, k, v, out, lse, scale, negative_infinity,  // forward
  dout, dq, dk, dv, one, softmax_sum, dq_accumulator  // and backward
};

// Each graph's operations, finalized (which needs no device); Graph::plan
// makes it runnable on a handle's device.
// out and lse from q, k, v (scale and negative_infinity by value).
cudnn::Graph forward(const cpu::AttentionShape& s, cudnnDataType_t io_type);
// dq, dk, dv from dout, q, k, v, out, lse; softmax_sum (B, NH, T) and
// dq_accumulator (B, NH, T, HS), fp32, are the caller's scratch; scale,
// negative_infinity and one by value.
cudnn::Graph backward(const cpu::AttentionShape& s, cudnnDataType_t io_type);

}  // namespace tessera::engine::cuda::attention_graphs
