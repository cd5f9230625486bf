// A tensor- or pipeline-parallel run's checkpoint, consolidated into whole
// tensors: each data-parallel group gathers its optimizer's shards on its rank
// 0 (the part of its stage that its tp rank holds), the tensor-parallel groups
// of data-parallel rank 0 gather those parts into their stage's whole tensors,
// the pipeline group of world rank 0 gathers the stages into the whole model
// (the last stage's copy of a tied embedding is the first stage's, kept once),
// and world rank 0 writes them (checkpoint.h,
// write_consolidated_checkpoint_files), weights and then each optimizer state.
// Save-time host memory, outside the training ledger.
#pragma once

#include <cstdint>
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
  comm::Communicator* pipeline;  // null without a pipeline
  comm::Communicator& world;
  int64_t model_chunks = 1;      // per pipeline stage
};

// Collective over every rank of `world`. `part`: what this rank's optimizer
// holds (tensor-parallel part of `stage`); `stage`: its pipeline stage's
// tensors, whole (planner/pipeline_stage_model.h). World rank 0 returns the
// files it wrote into `directory`; the others an empty list.
Result<std::vector<CheckpointFile>> write_consolidated_checkpoint(const ConsolidationGroups& groups, OptimizerShard& optimizer, const planner::Model& part,
                                                                  const planner::Model& stage, const planner::Model& whole, const planner::PluginOptions& plugin,
                                                                  planner::OptimizerKind kind, const std::string& directory,
                                                                  const TrainingPosition& position);

}  // namespace tessera::engine
