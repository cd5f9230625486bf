// Waiting for MPI without waiting forever (issue 16's --comm-timeout). Every
// call of the MPI backend starts a nonblocking operation (MPI_Ialltoallv,
// MPI_Isend, MPI_Ibarrier, ...) and polls it with MPI_Test (MPI-3.1 §3.7.3),
// which also drives MPI's progress as MPI_Wait would, until it completes or the
// call's deadline passes (deadline.h, shared with the NCCL backend). Private to
// the MPI backend (mpi.h documents the behaviour).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "deadline.h"
#include "mpi_status.h"

namespace tessera::engine::comm {

// One MPI_Test of `request` (MPI-3.1 §3.7.3), which also drives MPI's progress
// as MPI_Wait would: whether it has completed, or MPI's error naming `mpi_call`.
inline Result<bool> test_request(MPI_Request& request, MPI_Status* status, const char* mpi_call) {
  int done = 0;
  if (const int code = MPI_Test(&request, &done, status); code != MPI_SUCCESS) return mpi_status(code, mpi_call).error();
  return done != 0;
}

// Polls `request` until it completes (success; `status` filled as by MPI_Test),
// MPI reports an error, or `deadline` passes (poll_until_done). After an error
// `request` is MPI_REQUEST_NULL if MPI has released it, else the call is still pending.
inline Status wait_for(MPI_Request& request, MPI_Status* status, const Deadline& deadline, const char* mpi_call, size_t payload_bytes) {
  return poll_until_done([&] { return test_request(request, status, mpi_call); }, deadline, mpi_call, payload_bytes);
}

// Calls that timed out and are still in MPI's hands. A pending collective can
// be neither cancelled nor freed (MPI-3.1 §5.12), and MPI may still write into
// what it was given, so each keeps its request and whatever MPI may still use
// (its communicator, scratch buffers, count arrays). MpiRuntime asks before
// MPI_Finalize, which would wait for them (§8.7).
class AbandonedCalls {
 public:
  void keep(MPI_Request request, std::vector<std::shared_ptr<const void>> in_use) {
    requests_.push_back(request);
    for (auto& object : in_use) in_use_.push_back(std::move(object));
  }

  // Whether every abandoned call has completed since (one MPI_Testall, §3.7.5):
  // a late rank may have joined it after all.
  bool all_completed() {
    if (requests_.empty()) return true;
    int done = 0;
    return MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE) == MPI_SUCCESS && done != 0;
  }

 private:
  std::vector<MPI_Request> requests_;
  std::vector<std::shared_ptr<const void>> in_use_;
};

// Completes the nonblocking call that `started` (its return code) began, by
// `deadline` (wait_for). A call still pending after an error goes to
// `abandoned` with `in_use`: what MPI may still use besides the caller's buffers.
inline Status complete(int started, MPI_Request& request, const Deadline& deadline, const char* mpi_call, size_t payload_bytes,
                       AbandonedCalls& abandoned, std::vector<std::shared_ptr<const void>> in_use, MPI_Status* status = MPI_STATUS_IGNORE) {
  if (started != MPI_SUCCESS) return mpi_status(started, mpi_call);
  Status waited = wait_for(request, status, deadline, mpi_call, payload_bytes);
  if (request != MPI_REQUEST_NULL) abandoned.keep(request, std::move(in_use));
  return waited;
}

}  // namespace tessera::engine::comm
