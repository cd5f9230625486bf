// DeepSpeed's pipeline engine with its BF16_Optimizer (--runtime deepspeed
// --plugin hybrid_parallel), as Megatron-DeepSpeed runs it: BLOOM-176B trained
// on DeepSpeed's bf16 branch (bigscience-workshop/bigscience,
// train/tr11-176B-ml/README.md), merged as deepspeedai/DeepSpeed#1801. Read
// from deepspeedai/DeepSpeed at 36ad3119d (2022-06-10), the release line of that run:
//  - runtime/bf16_optimizer.py, BF16_Optimizer, the engine's optimizer for bf16
//    at ZeRO stage 0, which "implements its own ZeRO Stage 1" (BLOOM's README):
//    the bf16 parameters in flat groups, each padded to a multiple of
//    2 · dp elements (nccl_start_alignment_factor); every parameter's bf16
//    gradient as autograd leaves it (cleared before the next backward, not after
//    the step); an fp32 gradient buffer of every parameter
//    (fp32_groups_gradients_flat, not sharded); and, sharded over dp, the fp32
//    master partition and the optimizer's moments.
//  - After every micro-batch's backward (pipe/engine.py _exec_backward_pass, and
//    BF16_Optimizer.backward on the last stage): update_hp_grads casts each bf16
//    gradient to fp32 (read 2, write 4 bytes) and adds it into the buffer
//    (read 4 + 4, write 4).
//  - After the schedule (_exec_reduce_grads, _bf16_reduce_grads,
//    engine.py buffered_allreduce_fallback): the buffer is all-reduced over dp
//    in the engine's communication_data_type, bf16 at stage 0 (engine.py
//    communication_data_type). Each flat group is cast to bf16 (4 + 2), scaled
//    by 1/dp (2 + 2), copied back (2 + 4) and copied onto itself through
//    allreduce_and_copy's unflatten (4 + 4); the bf16 copy is held meanwhile.
//  - step(): the global norm reads the buffer (4), the optimizer steps the
//    fp32 partition, update_lp_params writes it into the bf16 partition (4 + 2),
//    all_gather_dp_groups gathers the bf16 partitions over dp, and
//    clear_hp_grads zeroes the buffer (4). Clipping scales the buffer too when
//    the norm exceeds gradient_clipping, which depends on the data: not counted.
#pragma once

namespace tessera::planner {

// Bytes a parameter moves through HBM after each micro-batch's backward.
inline constexpr double kDeepSpeedHpGradAccumulationBytes = (2 + 4) + (4 + 4 + 4);
// Bytes a parameter moves at the step, outside the optimizer's own update:
// the reduction's casts and copies, the norm's read, the buffer's zeroing.
inline constexpr double kDeepSpeedGradReduceCopyBytes = (4 + 2) + (2 + 2) + (2 + 4) + (4 + 4);
inline constexpr double kDeepSpeedNormAndClearBytes = 4 + 4;
// Bytes a partition element moves when update_lp_params writes it into bf16.
inline constexpr double kDeepSpeedLowPrecisionUpdateBytes = 4 + 2;
// The all-reduce's wire dtype (bf16) and the all-gathered partitions' (bf16).
inline constexpr double kDeepSpeedReduceWireBytes = 2;
inline constexpr double kDeepSpeedGatherWireBytes = 2;

}  // namespace tessera::planner
