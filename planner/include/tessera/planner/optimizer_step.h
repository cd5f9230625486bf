// Bytes one optimizer step moves through HBM per parameter it updates on the
// GPU, by runtime. The update itself is a fused Adam (apex FusedAdam, PyTorch's
// fused AdamW, Transformer Engine's FusedAdam): it reads the gradient, reads and
// writes the fp32 parameter and each fp32 moment. Around it:
//  - Megatron-LM and Megatron-Core (--runtime megatron): MixedPrecisionOptimizer.step,
//    read from NVIDIA/Megatron-LM at 79a3bb6b (megatron/optimizer/optimizer.py,
//    the SC21 scripts' commit) and d98e8a64 (megatron/core/optimizer/optimizer.py,
//    prepare_grads and step_with_ready_grads; distrib_optimizer.py for the shard):
//    _copy_model_grads_to_main_grads casts a 16-bit gradient to fp32 (`.float()`,
//    read 2, write 4; nothing where the main-gradient buffer is fp32 already, as
//    under bf16 without --grad-reduce-in-bf16), fp16's grad scaler unscales and checks the fp32 gradients
//    (_amp_foreach_non_finite_check_and_unscale_, read 4, write 4), clip_grad_norm
//    reads them for the norm (clip_grad is 1.0 by default; the scaling that
//    follows only when the norm exceeds it depends on the data, not counted), and
//    _copy_main_params_to_model_params writes the fp32 parameters back into the
//    16-bit ones (multi_tensor_scale, read 4, write 2).
//  - DeepSpeed's pipeline engine (deepspeed_pipeline.h): the fp32 partition's
//    update with its fp32 gradient, and update_lp_params' copy into bf16; the
//    norm and the buffer's zeroing run over every gradient, not the partition,
//    and are charged there.
//  - The others (ColossalAI's plugins and Tessera's engine, FSDP2, DeepSpeed
//    ZeRO-3): the update with the gradient in the compute dtype, and the new
//    16-bit weight written under mixed precision.
#pragma once

#include "tessera/planner/training_config.h"

namespace tessera::planner {

double optimizer_step_bytes_per_param(const PluginOptions& plugin, const TrainingOptions& training);

}  // namespace tessera::planner
