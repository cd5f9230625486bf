// Which data-parallel plugins the GPU training step runs (cuda/gpt_training.h):
// torch_ddp, and low_level_zero at ZeRO stage 1 or 2 (its optimizer on the
// device, or on the host with --cpu-offload); anything else is refused in one
// line naming the option. Shared by
// `tessera train --gpu` (which refuses before looking for a device) and the
// step itself; built without CUDA too.
#pragma once

#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

Status check_gpu_plugin(const planner::PluginOptions& plugin);

}  // namespace tessera::engine
