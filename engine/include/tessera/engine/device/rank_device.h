// Which CUDA device each rank of a launcher's job uses: one rank per GPU on
// each machine, the device whose index is the rank's local rank (its index
// among the ranks started on its machine), as torchrun's LOCAL_RANK is used.
// Pure bookkeeping, tested on the CPU; the GPU path makes the device current.
#pragma once

#include <functional>

#include "tessera/planner/status.h"

namespace tessera::engine {

struct LocalRank {
  int rank = 0;  // among the ranks on this machine
  int size = 1;  // ranks on this machine
};

// From the launcher's environment: Open MPI's OMPI_COMM_WORLD_LOCAL_RANK and
// OMPI_COMM_WORLD_LOCAL_SIZE (mpirun(1), "Environment variables"), or MPICH
// Hydra's MPI_LOCALRANKID and MPI_LOCALNRANKS; without either pair, every
// rank is on one machine (the world rank and size). `getenv` reads the
// environment (a test passes its own).
LocalRank local_rank_of(int world_rank, int world_size, const std::function<const char*(const char*)>& getenv);

// The device of `local` among `visible_devices` (what CUDA_VISIBLE_DEVICES
// leaves), or one line when the machine has fewer devices than ranks: then
// every rank of the machine refuses, not only those past the last device.
Result<int> device_of_local_rank(LocalRank local, int visible_devices);

}  // namespace tessera::engine
