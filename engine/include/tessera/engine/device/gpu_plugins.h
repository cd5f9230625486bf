// Which data-parallel plugins the GPU training step runs (cuda/gpt_training.h):
// torch_ddp, low_level_zero at ZeRO stage 1 or 2 (its optimizer on the
// device, or on the host with --cpu-offload), gemini where every chunk
// keeps its optimizer states and 16-bit shards on one side (placement cuda,
// cpu, or static sending all or none of them to the host), and
// hybrid_parallel at ZeRO stage 0 (DDP over the data-parallel ranks, as the
// CPU engine's); and which layouts: tensor parallelism (hybrid_parallel's, as
// on the CPU), with or without sequence parallelism (its collectives not
// overlapped with the GEMMs: no --tp-comm-overlap), and pipelines
// (hybrid_parallel's, GPipe or 1F1B, with data and tensor parallelism,
// parallel/pipeline_transfers.h). Anything else is
// refused in one line naming the option. Shared by
// `tessera train --gpu` (which refuses before looking for a device) and the
// step itself; built without CUDA too.
#pragma once

#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

Status check_gpu_plugin(const planner::PluginOptions& plugin);
Status check_gpu_layout(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout);

}  // namespace tessera::engine
