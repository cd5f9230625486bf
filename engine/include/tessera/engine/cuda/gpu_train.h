// `tessera train --gpu NAME` on one GPU: TrainOptions' steps of the GPU
// training step (cuda/gpt_training.h) on the run's data, one micro-batch per
// step, each step's loss and gradient norm printed as the CPU trainer does
// and kept in TrainMetrics with the ledger's device peaks per category. No
// checkpoint is written and no run is resumed yet; the options the step does
// not run are refused before it by the command (cli/src/train_command.cpp).
#pragma once

#include <ostream>

#include "tessera/engine/trainer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/status.h"

namespace tessera::engine::cuda {

Result<TrainMetrics> train_on_gpu(const planner::Model& model, const TrainOptions& options, std::ostream& progress);

}  // namespace tessera::engine::cuda
