// Adding each micro-batch's gradients into the step's: what it moves through
// HBM in the backward pass, outside the GEMMs, for the runtimes whose
// accumulation was read from their source. Element-wise and memory-bound, it
// runs on the compute stream after a parameter's gradient is produced.
//  - Megatron-LM and Megatron-Core (--runtime megatron): every gradient is
//    added into the contiguous main-gradient buffer, zeroed at each step (fp32
//    under bf16 and fp8 unless --grad-reduce-in-bf16, the parameters' dtype
//    under fp16: model_states_megatron.cpp),
//    which the collectives then reduce in place. A GEMM weight's gradient
//    accumulates inside its weight-gradient GEMM (gradient_accumulation_fusion,
//    on unless --no-gradient-accumulation-fusion: fused_weight_gradient_mlp_cuda.
//    wgrad_gemm_accum_fp32, or Transformer Engine's fuse_wgrad_accumulation;
//    NVIDIA/Megatron-LM core_v0.14.0 megatron/core/tensor_parallel/layers.py and
//    megatron/training/arguments.py). Every other gradient, and all of them
//    without the fusion, goes through the DDP's backward hook,
//    param.main_grad.add_(param.grad) (core_v0.14.0
//    megatron/core/distributed/distributed_data_parallel.py, _make_backward_post_hook;
//    79a3bb6b megatron/model/distributed.py, _make_param_hook): read the buffer
//    and the gradient, write the buffer, every micro-batch. Megatron-LM at
//    79a3bb6b (the SC21 scripts' commit) turns the fusion off unless gradients
//    accumulate in fp32, which fp16 runs do not (megatron/arguments.py). Its
//    --DDP-impl torch (until 2023) left gradients to PyTorch's AccumulateGrad
//    instead, which adds from the second micro-batch on: one add fewer a step,
//    not told apart.
//  - DeepSpeed's pipeline engine (deepspeed_pipeline.h): under bf16 its
//    BF16_Optimizer's update_hp_grads after every micro-batch; under fp16
//    PyTorch's AccumulateGrad, which adds each micro-batch's gradient into
//    param.grad in place (variable_grad += new_grad,
//    torch/csrc/autograd/functions/accumulate_grad.h) from the second on: the
//    first one's becomes param.grad.
//  - Not counted: ColossalAI's plugins and Tessera's engine, torchtitan's FSDP2
//    and DeepSpeed ZeRO-3. Their gradient handling differs plugin by plugin
//    (AccumulateGrad's in-place adds under no_sync, DDP's and ZeRO's bucket
//    copies, FSDP's divides and sharded adds, Gemini's chunk copies), and
//    counting it for some but not the others would tilt `tessera plan`'s
//    choice between them.
#pragma once

#include <cstdint>

#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Bytes per element of Megatron's main-gradient buffer: the parameters' dtype
// under fp16 and with --grad-reduce-in-bf16, else fp32 (Megatron-LM core_v0.14.0
// megatron/training/arguments.py: bf16 accumulates and reduces in fp32 unless
// --grad-reduce-in-bf16; core/distributed/distributed_data_parallel.py, grad_dtype).
constexpr int64_t megatron_main_grad_bytes(const PluginOptions& plugin, Precision p) {
  return p == Precision::fp16 || plugin.grad_reduce_in_bf16 ? 2 : 4;
}

// The precisions whose fp32 main-gradient buffer --grad-reduce-in-bf16 keeps in
// bf16 instead: bf16, and fp8 (which Megatron-LM runs under --bf16).
constexpr bool grad_reduce_in_bf16_applies(Precision p) { return p == Precision::bf16 || p == Precision::fp8; }

struct GradientAccumulation {
  double bytes_per_param = 0;           // adding one micro-batch's gradient of a parameter
  bool matmul_weights_fused = false;    // GEMM weights' gradients accumulate in their GEMM instead
  bool first_micro_batch_free = false;  // the first micro-batch's gradient becomes the accumulator
};
GradientAccumulation gradient_accumulation(const PluginOptions& plugin, const TrainingOptions& training);

// Bytes one micro-batch's accumulation moves, averaged over the step's
// `micro_batches`, on one rank of a stage holding `params` parameters,
// `non_matmul_params` of them outside GEMMs (StageShape).
double gradient_accumulation_bytes(const GradientAccumulation& a, int64_t params, int64_t non_matmul_params, int64_t micro_batches);

}  // namespace tessera::planner
