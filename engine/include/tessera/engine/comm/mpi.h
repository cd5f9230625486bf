// The MPI backend: ranks come from the launcher (`mpirun -np N`, `srun --mpi=pmix`),
// never from a home-made one. Built where CMake finds MPI (TESSERA_HAVE_MPI);
// this header names no MPI type, so code that includes it does not need mpi.h.
//
// MpiRuntime owns MPI's initialisation and finalisation: main (the launcher)
// starts exactly one and hands out communicators from it; nothing here is global.
// Every communicator keeps the runtime alive, so MPI_Finalize runs after the last
// communicator has freed its MPI_Comm (freeing one after MPI_Finalize is erroneous).
//
// Errors: MPI_ERRORS_RETURN is installed on MPI_COMM_WORLD and MPI_COMM_SELF as
// soon as MPI is up, and on every communicator made here, so a failing MPI call
// returns a code that becomes a Status (MPI-3.1 §8.3) instead of aborting the
// job. A failure inside MPI_Init_thread itself happens before any handler can be
// installed; Open MPI then reports it and aborts.
//
// Reductions: MPI lets an implementation evaluate a reduction in any order
// (MPI-3.1 §5.9.1: "the implementation can take advantage of associativity ...
// This may change the result of the reduction for operations that are not
// strictly associative and commutative, such as floating point addition") and
// only recommends, as advice to implementors, that MPI_REDUCE give the same
// result for the same arguments in the same order. It promises nothing about
// every rank of an MPI_Allreduce receiving the same bits, and Open MPI picks its
// algorithm by message size and process count. So this backend does not reduce
// with MPI_Allreduce: all_reduce and reduce_scatter split the buffer into one
// chunk per rank, MPI_Alltoallv brings every rank's copy of chunk r to rank r,
// rank r reduces them in rank order (reduce_in_rank_order, as §5.9.1's advice to
// users suggests), and all_reduce then MPI_Allgatherv's the chunks. The traffic
// is that of a ring all-reduce ((n-1)/n of the payload each way); the cost is a
// scratch buffer of one payload (count elements) for the duration of the call.
//
// Limits: counts are MPI ints, so one call moves at most 2^31 - 1 elements in
// total (all_reduce: count; reduce_scatter: size · recv_count; all_gather,
// broadcast, send, recv: their count); larger calls are refused with
// invalid_argument. Threads: MPI_THREAD_FUNNELED (MPI-3.1 §12.4.3): only the
// thread that started the runtime calls MPI, which holds while the engine's
// OpenMP threads never communicate; overlapping communication on a thread of its
// own (issue 16's DDP) will need MPI_THREAD_SERIALIZED or MULTIPLE.
//
// MPI_Finalize waits for the other ranks (MPI-3.1 §8.7), so a rank that returns
// early on an error while the others wait in a collective hangs the job; issue
// 16's --comm-timeout is what ends such jobs.
#pragma once

#include <memory>

#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/status.h"

namespace tessera::engine::comm {

class MpiRuntime : public std::enable_shared_from_this<MpiRuntime> {
 public:
  // MPI_Init_thread(FUNNELED). Fails if MPI is (or was) initialised in this
  // process already: MPI can be initialised once per process (MPI-3.1 §8.7), so
  // there is one runtime per process. Outside mpirun Open MPI starts a world of one.
  static Result<std::shared_ptr<MpiRuntime>> start();
  ~MpiRuntime();  // MPI_Finalize, on the thread that called start()
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // A communicator over every rank the launcher started, named "world": a
  // duplicate of MPI_COMM_WORLD, so its traffic cannot mix with any other
  // library's on MPI_COMM_WORLD. Each call makes a new one (collective).
  Result<std::unique_ptr<Communicator>> world();

 private:
  MpiRuntime(int world_rank, int world_size) : world_rank_(world_rank), world_size_(world_size) {}
  int world_rank_ = 0;
  int world_size_ = 1;
};

}  // namespace tessera::engine::comm
