// The element-wise HBM traffic of Megatron-LM's own transformer block (the
// megatron activation profile: Megatron-LM 2020-2022 and Megatron-DeepSpeed),
// kernel by kernel. Its element-wise work is fused into a few kernels, but each
// of those still reads its inputs from HBM and writes its outputs there, which
// is more than the once-per-kept-tensor traffic the simulator charges a
// runtime whose fusion it has not read (simulate.cpp). Read from
// NVIDIA/Megatron-LM@79a3bb6b (the SC21 scripts' commit: megatron/model/
// transformer.py, fused_softmax.py, fused_bias_gelu.py, fused_layer_norm.py,
// language_model.py, mpu/layers.py, and the CUDA kernels in
// megatron/fused_kernels/), with every fusion at its default (the scripts
// disable none):
//
// Forward, per token of one tensor-parallel rank:
//  - the two LayerNorms (apex's fused kernel): the input read, the output written;
//  - the query/key/value projection's bias, added after the GEMM
//    (LinearWithGradAccumulationAndAsyncCommunication: `output + bias`);
//  - the core (megatron_lm_core_bytes): over the s × s scores the fused causal
//    softmax (scaled_upper_triang_masked_softmax) reads each row's unmasked
//    keys and writes the whole row (the masked ones as zeros); in 16 bits up to
//    2,048 keys, which its CUDA code asserts; beyond that, or in fp32,
//    forward_torch_softmax's kernels: the cast to fp32 (the default layer
//    scaling implies --attention-softmax-in-fp32), the scaling, masked_fill_,
//    softmax and the cast back. Then torch's dropout (read, written with a
//    one-byte mask) and the context's `permute(...).contiguous()` copy. Under
//    ALiBi (BLOOM, bigscience-workshop/Megatron-DeepSpeed@8387ae17
//    transformer.py) the scores' GEMM starts from the bias broadcast over the
//    queries, which baddbmm copies into its output first and reads back;
//  - bias-dropout-add after attention and after the MLP (one TorchScript-fused
//    kernel each): the projection's output and the residual read, the sum and
//    the dropout mask written;
//  - the MLP's activation: bias_gelu (one fused kernel: read, write); SwiGLU
//    counted as torchtitan's SiLU and product (eager_elementwise.h).
// Backward:
//  - each LayerNorm: the output's gradient and the saved input read, the
//    input's gradient written: once by apex's persistent kernel (the hidden
//    sizes fused_layer_norm.py lists), twice each by Megatron's own;
//  - the two places where the residual stream's gradients meet (the block's
//    input, the attention sub-block's output): two read, their sum written;
//  - bias-dropout-add: the gradient and the mask read, the branch's gradient
//    written, and read again for its bias's gradient;
//  - bias_gelu_back: the gradient and the saved input read, the gradient
//    written, and read again for fc1's bias gradient;
//  - the core: dropout's backward (the gradient and the mask read, written),
//    the softmax's (the fused kernel reads the unmasked part of the
//    probabilities and the gradient and writes the whole row), and the scaling
//    of dQ and dK by baddbmm's alpha (PyTorch's derivative of baddbmm);
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

// The fused causal softmax's limit (scaled_upper_triang_masked_softmax_cuda.cu).
inline constexpr int64_t kFusedCausalSoftmaxMaxKeys = 2048;

// The attention core's element-wise work (CoreAttention beyond its two batched
// GEMMs, which attention_core_seconds times), per token of one tensor-parallel
// rank of `tp`, for sequences of `seq_len` tokens (the keys each query's scores
// cover). Selective recompute runs it again.
ElementwiseBytes megatron_lm_core_bytes(const ModelConfig& config, int64_t dtype_bytes, int64_t tp, int64_t seq_len);

// One block, the core included, likewise.
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
