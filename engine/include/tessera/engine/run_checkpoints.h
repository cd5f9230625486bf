// The checkpoint bookkeeping every training loop shares: the CPU trainer
// (trainer.h) and the GPU loop (cuda/gpu_train.h). What a run records of its
// settings in each manifest, which committed checkpoint a resume continues
// (decided by rank 0, which holds the run directory, and told to the others),
// and the commit of a checkpoint's files (run_directory.h has the protocol).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/engine/checkpoint_manifest.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/data.h"
#include "tessera/engine/run_directory.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/model.h"

namespace tessera::engine {

// What the run computes, recorded in each checkpoint's manifest and compared
// on resume, for a run on `data_parallel_ranks` ranks.
std::vector<RunSetting> run_settings(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, int64_t data_parallel_ranks);

// The committed checkpoint the run continues (nullopt: start at step 1), or a
// refusal: rank 0 (o.run_directory set) verifies it and checks `settings`
// against its manifest, and with `control` (null or one rank: alone) tells
// every rank which step to load from o.run_directory_path. Collective.
Result<std::optional<CommittedCheckpoint>> agree_on_checkpoint(comm::Communicator* control, const TrainOptions& o, const std::vector<RunSetting>& settings,
                                                               std::ostream& progress);

// Rank 0: writes `model_config_text` (when not empty) into the staging
// directory as config.json, adds it to `manifest`, and commits, linking
// `top_level_links` from the run directory.
Status commit_checkpoint_files(RunDirectory& dir, const CheckpointStaging& staging, CheckpointManifest manifest, const std::string& model_config_text,
                               const std::vector<std::string>& top_level_links);

}  // namespace tessera::engine
