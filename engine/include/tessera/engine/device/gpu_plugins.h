// Which data-parallel plugins the GPU training step runs (cuda/gpt_training.h):
// torch_ddp, torch_fsdp (full_shard or shard_grad_op), low_level_zero at
// ZeRO stage 1 or 2 (its optimizer on the device, or on the host with
// --cpu-offload), gemini under every placement (static's chunks split
// between the device and the host included; auto as the planner solves it
// for the GPU), and
// hybrid_parallel at ZeRO stage 0 (DDP over the data-parallel ranks, as the
// CPU engine's) or 1 or 2 (ZeRO over them, its optimizer on the device, or
// on the host with --cpu-offload); ZeRO-Offload with 2 or more data-parallel ranks;
// and which layouts: tensor parallelism (hybrid_parallel's, as
// on the CPU), with or without sequence parallelism (and with it
// --tp-comm-overlap, model/sequence_overlap.h), and pipelines
// (hybrid_parallel's, GPipe, 1F1B or interleaved, with data and tensor parallelism,
// DDP or ZeRO-1 over each stage's data-parallel ranks; ZeRO-2 refused as the
// planner refuses it; parallel/pipeline_transfers.h), context parallelism
// (hybrid_parallel's ring attention, beside data, tensor and pipeline
// parallelism); and AdamW as the optimizer. Anything else is
// refused in one line naming the option. Shared by
// `tessera train --gpu` (which refuses before looking for a device) and the
// step itself; built without CUDA too.
#pragma once

#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

Status check_gpu_plugin(const planner::PluginOptions& plugin);
Status check_gpu_layout(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout);
Status check_gpu_optimizer(planner::OptimizerKind optimizer);

}  // namespace tessera::engine
