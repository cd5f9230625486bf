// A sharded optimizer's checkpoint files, written together by every rank of
// a data-parallel group: rank 0 gathers the shards' fp32 weights into the
// whole model (gather_shard_values, by planner/optimizer_layout.h's rule) for
// model.safetensors, every rank writes its optimizer shard file
// (checkpoint.h, write_sharded_checkpoint_files), and rank 0 learns every
// rank's digest for the manifest. Shared by the CPU trainer (trainer.h) and
// the GPU loop (cuda/gpu_train.h), so a low_level_zero checkpoint of either
// resumes on the other. Save-time host memory, outside the training ledger.
#pragma once

#include <string>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// Collective over `group` (on host buffers). `optimizer`: this rank's shard,
// laid out by `plugin` over the group. Rank 0 returns every file of the
// checkpoint (model.safetensors and each rank's shard, with its digest);
// the others their own shard file. An error where this rank's write failed,
// or rank 0's where another's did.
Result<std::vector<CheckpointFile>> write_sharded_checkpoint(comm::Communicator& group, const std::string& directory, const planner::Model& model,
                                                             OptimizerShard& optimizer, const planner::PluginOptions& plugin, planner::OptimizerKind kind,
                                                             const TrainingPosition& position);

}  // namespace tessera::engine
