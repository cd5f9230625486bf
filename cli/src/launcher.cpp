#include "launcher.h"

#include <chrono>
#include <cstdlib>

#include "tessera/engine/comm/local.h"
#ifdef TESSERA_HAVE_MPI
#include "tessera/engine/comm/mpi.h"
#endif

namespace tessera::cli {

// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMIx launchers (srun --mpi=pmix,
// prterun) set PMIX_RANK; PMI-1/2 launchers (MPICH's hydra, srun --mpi=pmi2) set PMI_RANK.
bool started_by_launcher() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

Result<LaunchedRanks> join_launched_ranks(double comm_timeout_s) {
  LaunchedRanks ranks;
  if (!started_by_launcher()) {
    ranks.world = engine::comm::make_local_communicator();
    return ranks;
  }
#ifdef TESSERA_HAVE_MPI
  auto runtime = engine::comm::MpiRuntime::start();
  if (!runtime) return runtime.error();
  auto world = runtime.value()->world(std::chrono::duration<double>(comm_timeout_s));
  if (!world) return world.error();
  ranks.runtime = runtime.value();
  ranks.world = std::move(world).value();
  return ranks;
#else
  (void)comm_timeout_s;
  return make_error(ErrorCode::unsupported, "this tessera was built without MPI, so it cannot join the ranks mpirun started; "
                                            "install libopenmpi-dev and rebuild (tools/setup)");
#endif
}

}  // namespace tessera::cli
