// The data-, tensor-, context- and pipeline-parallel groups of a plan's
// layout, split from the launcher's world with planner::group_index
// (rank_groups.h): the one rank order the planner simulates, the GUI's device
// mesh draws and the engine runs (tensor-parallel ranks fastest, then
// context, data, pipeline).
#pragma once

#include <memory>

#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/rank_groups.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

struct ProcessGroups {
  planner::RankCoordinates coordinates;        // this rank's place in the layout
  std::unique_ptr<comm::Communicator> data;      // "dp": same tp and pp rank
  std::unique_ptr<comm::Communicator> tensor;    // "tp": same dp and pp rank
  std::unique_ptr<comm::Communicator> pipeline;  // "pp": same tp and dp rank
  std::unique_ptr<comm::Communicator> context;   // "cp": same tp, dp and pp rank
  // "dp-cp": same tp and pp rank, the ranks that reduce gradients together
  // (planner::data_context_group_index); the data group itself without context parallelism.
  std::unique_ptr<comm::Communicator> data_context;
};

// Collective over `world`, whose size must be the layout's world size (an
// invalid_argument naming mpirun -np otherwise, before any communication).
// Each group's ranks are numbered as planner::group_members lists them.
Result<ProcessGroups> make_process_groups(comm::Communicator& world, const planner::ParallelLayout& layout);

}  // namespace tessera::engine
