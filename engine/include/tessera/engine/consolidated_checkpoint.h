// A tensor-parallel run's checkpoint, consolidated into whole tensors: each
// data-parallel group gathers its optimizer's shards on its rank 0 (the part of
// the model its tp rank holds), the tensor-parallel group of world rank 0
// gathers those parts into whole tensors, and world rank 0 writes them
// (checkpoint.h, write_consolidated_checkpoint_files), weights and then each
// optimizer state. Save-time host memory, outside the training ledger.
#pragma once

#include <string>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

struct ConsolidationGroups {
  comm::Communicator& data;
  comm::Communicator& tensor;
  comm::Communicator& world;
};

// Collective over every rank of `world`. World rank 0 returns the files it
// wrote into `directory`; the others an empty list.
Result<std::vector<CheckpointFile>> write_consolidated_checkpoint(const ConsolidationGroups& groups, OptimizerShard& optimizer, const planner::Model& part,
                                                                  const planner::Model& whole, const planner::PluginOptions& plugin,
                                                                  planner::OptimizerKind kind, const std::string& directory,
                                                                  const TrainingPosition& position);

}  // namespace tessera::engine
