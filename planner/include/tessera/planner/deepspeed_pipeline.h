// DeepSpeed's pipeline engine (--runtime deepspeed --plugin hybrid_parallel),
// as Megatron-DeepSpeed runs it, with the optimizer DeepSpeed gives it at ZeRO
// stage 1: its BF16_Optimizer under bf16, DeepSpeedZeroOptimizer under fp16.
//
// Under bf16, the BF16_Optimizer, as BLOOM-176B trained
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
//
// Under fp16, DeepSpeedZeroOptimizer at stage 1, read from deepspeedai/DeepSpeed
// at v0.9.5 (the Megatron-DeepSpeed V100 row's release; runtime/zero/stage_1_and_2.py,
// runtime/pipe/engine.py, runtime/engine.py), with its defaults (contiguous_gradients
// and reduce_scatter on, overlap_comm off at stage 1):
//  - fp16 parameters in flat groups padded as the BF16_Optimizer's; fp16
//    gradients as autograd leaves them, added into across micro-batches by
//    PyTorch's AccumulateGrad (no reduction hooks at stage 1 without
//    overlap_comm); the fp32 master partition and moments sharded over dp; a
//    contiguous fp16 copy of the partition's gradients (grads_in_partition),
//    kept between steps.
//  - After the schedule (_exec_reduce_grads → allreduce_gradients →
//    reduce_gradients(pipeline_parallel=True)): each gradient is copied into the
//    reduce_bucket_size-element ipg buffer (2 + 2), each bucket divided by dp
//    (2 + 2) and reduced slice by slice to the rank that owns it (average_tensor:
//    one dist.reduce per partition, a reduce-scatter's traffic, in fp16); the
//    partition's gradients are copied out of the bucket (copy_grads_in_partition,
//    2 + 2).
//  - step(): the overflow check casts each partition gradient to fp32 and sums it
//    (has_overflow_partitioned_grads_serial, _has_inf_or_nan: 2 + 4, 4), the norm
//    casts it to fp64 (get_grad_norm_direct, .double().norm(): 2 + 8, 8), the
//    partition is flattened (2 + 2) and cast to fp32 (2 + 4), unscaled and
//    clipped in place (unscale_and_clip_grads: 4 + 4), the optimizer steps it,
//    the fp32 partition is copied into the fp16 one (4 + 2) and
//    all_gather_dp_groups gathers the fp16 partitions over dp.
#pragma once

#include "tessera/planner/training_config.h"

namespace tessera::planner {

// The precisions the engine is modelled in: bf16 (BF16_Optimizer) and fp16 (DeepSpeedZeroOptimizer).
constexpr bool deepspeed_pipeline_precision(Precision p) { return p == Precision::bf16 || p == Precision::fp16; }

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

// fp16, DeepSpeedZeroOptimizer: what AccumulateGrad's in-place add moves per
// parameter from the second micro-batch on; what every gradient moves into the
// ipg bucket and through its division; what a partition element moves before
// the optimizer's update (its copy out of the bucket, the overflow check, the
// norm, the flattening and cast to fp32, the unscaling).
inline constexpr double kDeepSpeedFp16GradAddBytes = 2 + 2 + 2;
inline constexpr double kDeepSpeedZeroBucketBytes = (2 + 2) + (2 + 2);
inline constexpr double kDeepSpeedZeroPartitionPrepBytes = (2 + 2) + (2 + 4 + 4) + (2 + 8 + 8) + (2 + 2) + (2 + 4) + (4 + 4);

}  // namespace tessera::planner
