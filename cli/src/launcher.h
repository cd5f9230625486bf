// The ranks of this run, as the launcher started them: under `mpirun` or
// `srun --mpi=pmix` an MPI world (ranks are never made up here), otherwise a
// world of one.
#pragma once

#include <memory>

#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/status.h"

namespace tessera::cli {

struct LaunchedRanks {
  std::shared_ptr<void> runtime;  // keeps MPI up while `world` lives (MpiRuntime)
  std::unique_ptr<engine::comm::Communicator> world;
};

// Whether a launcher started this process as one rank of several (Open MPI's,
// PMIx's or PMI's environment says so).
bool started_by_launcher();
// `comm_timeout_s`: how long any collective may wait for the other ranks
// before this rank gives up with an error naming the call (MPI only).
Result<LaunchedRanks> join_launched_ranks(double comm_timeout_s);

}  // namespace tessera::cli
