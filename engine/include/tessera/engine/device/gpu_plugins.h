// Which data-parallel plugins the GPU training step runs (cuda/gpt_training.h):
// torch_ddp, low_level_zero at ZeRO stage 1 or 2 (its optimizer on the
// device, or on the host with --cpu-offload), and gemini where every chunk
// keeps its optimizer states and 16-bit shards on one side (placement cuda,
// cpu, or static sending all or none of them to the host); anything else is
// refused in one line naming the option. Shared by
// `tessera train --gpu` (which refuses before looking for a device) and the
// step itself; built without CUDA too.
#pragma once

#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

Status check_gpu_plugin(const planner::PluginOptions& plugin);

}  // namespace tessera::engine
