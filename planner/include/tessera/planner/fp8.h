// FP8 training as Transformer Engine runs it (--precision fp8): what it keeps
// besides a bf16 run's model states, and which activations it saves in FP8.
// Read from NVIDIA/TransformerEngine at 0004dbd0231cb02d7b47d45344900a494fa13f46
// (transformer_engine/pytorch/module/base.py and linear.py) and its recipe at
// 18353ec1e277c4bb75a1f619fec1eafac29d942a (transformer_engine/common/recipe.py):
//  - weight caches: with micro-batches (is_first_microbatch given, as Megatron-Core
//    passes it), base.py set_fp8_weights keeps, per GEMM weight, an FP8 copy
//    (weight1_fp8) and its transpose (weight1_t_fp8), one byte per element each,
//    persistent between steps, at the module's local shape (after tensor
//    parallelism, never sharded by ZeRO or FSDP);
//  - scaling state: base.py set_meta_tensor gives each module, per GEMM, 3
//    forward tensors (input, weight, output) and 2 backward ones (grad_output,
//    grad_input), each with an fp32 scale, scale_inv and amax_history of
//    DelayedScaling.amax_history_len (1024 by default) rows;
//  - saved activations: a GEMM's input is saved for the weight gradient as its
//    FP8 cast (linear.py _Linear.forward: saved_inputmat_t / inputmat under fp8),
//    the same in LayerNormLinear (ln_out) and LayerNormMLP (ln_out and the
//    activation's output gelu_out; fc1_out stays in the activation dtype).
// A transformer block runs 4 GEMMs in Megatron-Core's Transformer Engine layer
// spec: LayerNormLinear (q, k, v fused), the output projection's Linear, and
// LayerNormMLP's fc1 and fc2. The embedding and the output layer stay bf16.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tessera/planner/model.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

constexpr bool is_fp8(Precision p) { return p == Precision::fp8; }

// How to read an FP8 plan's speed, wherever it is shown (the plan table, the
// window, the reports): every published FP8 run measured slower than the
// simulator predicts (README, "Which rows are off"), and MFU is stated on the
// bf16 peak, as those runs state it.
inline constexpr const char* kFp8ThroughputCaveat =
    "FP8 steps are predicted faster than every published FP8 run they were checked against (README, Validation); read FP8 tokens/s as an "
    "upper bound";
constexpr const char* mfu_basis(Precision p) { return is_fp8(p) ? " of the bf16 peak" : ""; }

inline constexpr int64_t kTeGemmsPerBlock = 4;
inline constexpr int64_t kTeAmaxHistoryLen = 1024;  // DelayedScaling.amax_history_len default
inline constexpr int64_t kTeScaledTensorsPerGemm = 3 + 2;  // forward input, weight, output; backward grad_output, grad_input

// The blocks' GEMM weights one tensor-parallel rank of a pipeline stage holds
// (its model chunks): what Transformer Engine runs in FP8.
int64_t fp8_weight_elements(const Model& model, std::span<const StageLayers> chunks, int64_t tp);

// Scale, scale_inv and amax history of one block's GEMMs: 4 × 5 × (1024 + 2) × 4 bytes.
constexpr int64_t fp8_scaling_bytes_per_block() { return kTeGemmsPerBlock * kTeScaledTensorsPerGemm * (kTeAmaxHistoryLen + 2) * 4; }

// What FP8 adds to a rank's parameters for the blocks of its chunks: the
// scaling state and, unless the weights are FP8 already, their FP8 copy and
// transpose (one byte each). Under --fp8-param-gather (Megatron-LM core_v0.14.0
// megatron/training/arguments.py, fp8_param_gather; TE's fp8_model_init) the
// parameters are FP8 tensors: one byte in the distributed optimizer's buffer and
// one for the transpose TE caches for the backward (Linear's transpose_2d with
// fill_cache), the two bytes a bf16 weight took, and nothing to copy.
int64_t fp8_state_bytes(const Model& model, std::span<const StageLayers> chunks, int64_t tp, bool fp8_param_gather);

// Elements per token one block casts to FP8 (before tensor parallelism). Each
// cast is TE's fused cast-transpose (tex.fp8_cast_transpose_fused in linear.py's
// forward, fp8_cast_transpose_bgrad_fused for grad_output in backward): it reads
// the bf16 tensor and writes the FP8 tensor and its transpose, 4 bytes per
// element of HBM traffic. Forward: the 4 GEMM inputs; backward: the gradients
// of the 4 GEMM outputs.
struct Fp8Casts {
  int64_t forward = 0;
  int64_t backward = 0;
};
Fp8Casts fp8_cast_elements_per_token(const ModelConfig& config);
inline constexpr int64_t kFp8CastBytesPerElement = 2 + 1 + 1;

// Transformer Engine runs a block's forward GEMMs with cuBLASLt's fast FP8
// accumulation and its backward GEMMs (input and weight gradients) with the
// split accumulator, which promotes the tensor cores' partial sums to FP32 at
// intervals (base.py at 0004dbd0: _2X_ACC_FPROP = False, _2X_ACC_DGRAD = True,
// _2X_ACC_WGRAD = True; cuBLAS docs, CUBLASLT_MATMUL_DESC_FAST_ACCUM). Fast
// accumulation was measured 1.1x to 1.2x faster with torch._scaled_mm
// (pytorch/ao issue #2377, 2025-06): the middle of that range.
inline constexpr double kFp8SplitAccumulatorSlowdown = 1.15;

// Delayed scaling's amax reductions. Each model chunk's forward ends inside
// fp8_autocast's exit with FP8GlobalStateManager.reduce_and_update_fp8_tensors,
// an all_reduce(MAX, async_op=False) of the chunk's forward amaxes (input,
// weight and output per GEMM) over the autocast's group, and its backward makes
// one of the backward amaxes (grad_output and grad_input per GEMM) in the first
// module's backward (NVIDIA/TransformerEngine v1.11 transformer_engine/pytorch/
// fp8.py and module/layernorm_linear.py, reduce_and_update_bwd_fp8_tensors).
// Megatron-Core's group is every rank of the tp × dp × cp group
// (NVIDIA/Megatron-LM core_r0.9.0 megatron/core/transformer/transformer_block.py,
// get_amax_reduction_group(with_context_parallel=True); parallel_state.py). The
// bytes of one such reduction over `blocks` blocks: fp32 amaxes.
constexpr int64_t fp8_amax_reduction_bytes(int64_t blocks, bool forward) {
  return blocks * kTeGemmsPerBlock * (forward ? 3 : 2) * 4;
}

// Whether Transformer Engine saves this activation term (activations.h, the
// megatron and flash tables) as its FP8 cast: the input of a GEMM.
bool saved_in_fp8(std::string_view term_name);

}  // namespace tessera::planner
