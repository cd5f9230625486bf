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
// chunk per rank, MPI_Ialltoallv brings every rank's copy of chunk r to rank r,
// rank r reduces them in rank order (reduce_in_rank_order, as §5.9.1's advice to
// users suggests), and all_reduce then MPI_Iallgatherv's the chunks (on a
// duplicate of the group's MPI_Comm, so that a started all_reduce's second
// exchange keeps one order with the others on every rank). The traffic
// is that of a ring all-reduce ((n-1)/n of the payload each way); the cost is a
// scratch buffer of one payload (count elements) for the duration of the call.
//
// Limits: counts are MPI ints, so one call moves at most 2^31 - 1 elements in
// total (all_reduce: count; reduce_scatter: size · recv_count; all_gather,
// broadcast, send, recv: their count); larger calls are refused with
// invalid_argument. Threads: MPI_THREAD_FUNNELED (MPI-3.1 §12.4.3): only the
// thread that started the runtime calls MPI, which holds while the engine's
// OpenMP threads never communicate. DDP's overlap needs no thread of its own:
// start_all_reduce returns with the call pending and the training thread moves
// it along between layers (progress()).
//
// Timeout (issue 16's --comm-timeout): no call waits forever for the other
// ranks. Each call starts nonblocking MPI operations (MPI_Ialltoallv,
// MPI_Iallgatherv, MPI_Iallgather, MPI_Ibcast, MPI_Isend, MPI_Irecv, MPI_Ibarrier;
// MPI_Comm_idup for world(); split() first meets the others in an MPI_Ibarrier,
// as MPI_Comm_split has no nonblocking form) and polls them with MPI_Test. If
// the call has not completed `timeout` after it started, it fails with
// comm_error, one line naming the call, the group, the rank, the MPI operation,
// the payload and the timeout:
//   all_reduce on 'world' (rank 2 of 4, world rank 2): MPI_Ialltoallv of 1.70 MiB
//   did not complete within 300 s (--comm-timeout); another rank has died or is
//   stuck, or did not make this call
// The operation stays pending in MPI (a collective can be neither cancelled nor
// freed, MPI-3.1 §5.12) and may still write the call's receive buffer: stop the
// run. MPI_Finalize would wait for that operation and for the other ranks
// (§8.7), so the runtime's destructor then skips it; the process exits, and
// mpirun, seeing a rank end without MPI_Finalize or with a non-zero status,
// ends the others.
//
// What happens when a rank dies, measured with Open MPI 4.1.4 on one machine
// (`mpirun --allow-run-as-root --oversubscribe -np 4`, rank 1 SIGKILLed in an
// all_reduce loop; tests/comm/mpi_timeout.sh): mpirun ends the job itself
// 1.4 to 1.8 s later, before any timeout. It sends SIGTERM to the other ranks
// (and SIGKILL a second later to those that catch it, as `tessera train`
// does), reports the killed rank and exits with 137; the survivors print
// nothing of their own. It does the same when a rank exits non-zero or without
// MPI_Finalize. With mpirun told to let the job run on (--mca
// orte_abort_on_non_zero_status 0), MPI reported no error to the survivors:
// only the timeout ended their wait. So the timeout ends the jobs the launcher
// does not: a rank stuck (a deadlock, a hung file system), a rank that skipped
// a call or returned early, a launcher that lets the others run on. Measured
// with rank 1 stuck and a 3 s timeout: each other rank printed the line above
// and exited 1, then mpirun ended rank 1 and exited 1, 3.4 to 5.4 s after start.
#pragma once

#include <chrono>
#include <memory>

#include "tessera/engine/comm/communicator.h"
#include "tessera/planner/status.h"

namespace tessera::engine::comm {

class AbandonedCalls;  // calls that timed out (private to the MPI backend)

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
  // Each of its calls, and making it, fails after `timeout` (above); groups
  // split() from it inherit the timeout. A timeout that is not above 0 (NaN
  // included) is refused with invalid_argument; an infinite one never expires.
  Result<std::unique_ptr<Communicator>> world(std::chrono::duration<double> timeout = kDefaultCommTimeout);

 private:
  MpiRuntime(int world_rank, int world_size);
  int world_rank_ = 0;
  int world_size_ = 1;
  std::shared_ptr<AbandonedCalls> abandoned_;
};

}  // namespace tessera::engine::comm
