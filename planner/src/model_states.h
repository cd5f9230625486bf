// Model states as Megatron-Core, torchtitan's FSDP2 and DeepSpeed (ZeRO-3, or
// its pipeline engine) keep them (--runtime megatron | torchtitan | deepspeed): per rank, the bytes of
// the parameters, gradients, fp32 master weights and optimizer states, and the
// buffers each runtime gathers and reduces them through. Each formula cites the
// runtime's source at a commit; ColossalAI's plugins stay in memory_model.cpp.
#pragma once

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

// What --runtime accepts with the request's plugin and settings (validate_runtime.cpp).
Status check_runtime(const EstimateRequest& request);

// The model and settings --runtime megatron builds and takes (runtime_models.h):
// a model Megatron-Core's GPT does not build, another activation profile or
// torch.compile is refused with the fix. (--runtime torchtitan counts FSDP2 as
// torchtitan applies it, to any model; its export takes llama3's flavors.)
Status check_runtime_model(const ModelConfig& config, const EstimateRequest& request);

// --recompute op_selective is torchtitan's policy on its Llama block with SDPA
// (op_checkpoint_policy.h): --runtime torchtitan, the flash profile, a Llama-shaped model.
Status check_op_selective(const ModelConfig& config, const EstimateRequest& request);

// Megatron-Core's DistributedDataParallel and optimizer (model_states_megatron.cpp):
// one pipeline stage of one tensor-parallel rank.
void add_megatron_states(const Model& model, const StageShape& stage, const EstimateRequest& request, MemoryBreakdown& out);

// FSDP2 (fully_shard) as torchtitan applies it (model_states_fsdp2.cpp).
void add_fsdp2_states(const Model& model, const EstimateRequest& request, MemoryBreakdown& out);

// DeepSpeed ZeRO-3 (model_states_deepspeed.cpp).
void add_deepspeed_zero3_states(const Model& model, const EstimateRequest& request, MemoryBreakdown& out);

// DeepSpeed's pipeline engine with its BF16_Optimizer (deepspeed_pipeline.h,
// model_states_deepspeed.cpp): one pipeline stage of one tensor-parallel rank.
void add_deepspeed_pipeline_states(const StageShape& stage, const EstimateRequest& request, MemoryBreakdown& out);
// Its all-reduce's bf16 copy of the fp32 gradient buffer, held after the
// schedule, when the activations and logits are free: what it adds to a peak
// that `out` (with them counted) already holds.
void add_deepspeed_reduce_copy(const StageShape& stage, const EstimateRequest& request, MemoryBreakdown& out);

}  // namespace tessera::planner
