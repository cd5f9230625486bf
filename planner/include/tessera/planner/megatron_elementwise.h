// The element-wise HBM traffic of Megatron-LM's own transformer block (the
// megatron activation profile: Megatron-LM 2020-2022 and Megatron-DeepSpeed),
// kernel by kernel. Its element-wise work is fused into a few kernels, but each
// of those still reads its inputs from HBM and writes its outputs there, which
// is more than the once-per-kept-tensor traffic the simulator charges a
// runtime whose fusion it has not read (simulate.cpp). Read from
// NVIDIA/Megatron-LM@79a3bb6b (the SC21 scripts' commit: megatron/model/
// transformer.py, fused_softmax.py, fused_bias_gelu.py, language_model.py,
// mpu/layers.py), with every fusion at its default (the scripts disable none):
//
// Forward, per token of one tensor-parallel rank:
//  - the two LayerNorms (apex's fused kernel): the input read, the output written;
//  - the query/key/value projection's bias, added after the GEMM
//    (LinearWithGradAccumulationAndAsyncCommunication: `output + bias`);
//  - the core: the fused causal softmax (scaled_upper_triang_masked_softmax)
//    writes the probabilities, torch's dropout the dropped probabilities and
//    a one-byte mask, over every s × s score, the masked ones included (the
//    kernel writes their zeros); their reads are attention_core_seconds'
//    (gemm_model.h); then the context's `permute(...).contiguous()` copy;
//  - bias-dropout-add after attention and after the MLP (one TorchScript-fused
//    kernel each): the projection's output and the residual read, the sum and
//    the dropout mask written;
//  - the MLP's activation: bias_gelu (one fused kernel: read, write); SwiGLU
//    counted as torchtitan's SiLU and product (eager_elementwise.h).
// Backward:
//  - each LayerNorm: the output's gradient and the saved input read, the
//    input's gradient written;
//  - the two places where the residual stream's gradients meet (the block's
//    input, the attention sub-block's output): two read, their sum written;
//  - bias-dropout-add: the gradient and the mask read, the branch's gradient
//    written, and read again for its bias's gradient;
//  - bias_gelu_back: the gradient and the saved input read, the gradient
//    written, and read again for fc1's bias gradient;
//  - the core: dropout's backward (the gradient and the mask read, written),
//    the fused softmax's (the probabilities and the gradient read, written);
//  - q, k and v's gradients concatenated back into the projection's layout
//    (split's backward), and read for its bias's gradient.
// Under sequence parallelism the LayerNorms, bias-dropout-adds and residual
// sums run on the rank's 1/tp of the tokens. RoPE (Megatron-LM added it after
// this commit) is charged as one kernel reading and writing q and k.
// Megatron-Core with Transformer Engine (the runtime megatron with the flash
// profile) runs other kernels and is not described here.
#pragma once

#include <cstdint>

#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/model_config.h"

namespace tessera::planner {

// One block, per token of `dtype_bytes` activations, on one tensor-parallel
// rank of `tp`, for sequences of `seq_len` tokens (the keys each query's
// scores cover).
ElementwiseBytes megatron_lm_block_bytes(const ModelConfig& config, int64_t dtype_bytes, int64_t tp, bool sequence_parallel, int64_t seq_len);

// Outside the blocks, per token. First stage: the word and position
// lookups, their sum, the [b, s] → [s, b] copy and the embedding dropout
// (language_model.py Embedding), BLOOM's embedding LayerNorm; in backward the
// dropout's and the lookups' gradients added into the tables. Last stage: the
// final LayerNorm and Megatron's vocabulary-parallel cross-entropy
// (vocab_parallel_loss.h).
OutsideBlocksBytes megatron_lm_outside_bytes(const ModelConfig& config, int64_t dtype_bytes, int64_t tp, bool sequence_parallel,
                                             bool cross_entropy_loss_fusion);

}  // namespace tessera::planner
