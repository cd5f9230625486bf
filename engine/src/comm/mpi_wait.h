// Waiting for MPI without waiting forever (issue 16's --comm-timeout). Every
// call of the MPI backend starts a nonblocking operation (MPI_Ialltoallv,
// MPI_Isend, MPI_Ibarrier, ...) and polls it with MPI_Test (MPI-3.1 §3.7.3),
// which also drives MPI's progress as MPI_Wait would, until it completes or the
// call's deadline passes. Private to the MPI backend (mpi.h documents the behaviour).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mpi_status.h"
#include "tessera/planner/report.h"

namespace tessera::engine::comm {

// "300 s", "0.5 s": a timeout as messages show it.
inline std::string seconds_text(std::chrono::duration<double> seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds.count());
  return text;
}

// When a call started and how long it may wait in all: all_reduce's two
// exchanges share one deadline. An infinite timeout never passes.
class Deadline {
 public:
  explicit Deadline(std::chrono::duration<double> timeout) : timeout_(timeout) {}
  std::chrono::duration<double> timeout() const { return timeout_; }
  std::chrono::duration<double> elapsed() const { return std::chrono::steady_clock::now() - start_; }
  bool passed() const { return elapsed() >= timeout_; }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::duration<double> timeout_;
};

// Calls `test` (which advances a call without waiting and says whether it
// has completed) until it says so (success), fails (its error), or `deadline`
// passes: comm_error "MPI_Ialltoallv of 1.70 MiB did not complete within 30 s
// (--comm-timeout); ...", `payload_bytes` being the call's payload as
// CommCounters counts it (0: not named). `mpi_call` is read when the deadline
// passes: a call of several exchanges names the one it was waiting on.
template <typename Test>
Status poll_until_done(Test test, const Deadline& deadline, const char* const& mpi_call, size_t payload_bytes) {
  // Most calls complete within microseconds: for the first millisecond poll
  // without sleeping (a sleep would cost more than the call), yielding the core
  // to ranks that share it; then sleep between polls, doubling up to 1 ms, so a
  // long wait (a rank writing a checkpoint) costs little CPU.
  constexpr std::chrono::duration<double> kPollOnly = std::chrono::milliseconds(1);
  constexpr std::chrono::microseconds kLongestSleep(1000);
  std::chrono::microseconds sleep(16);
  const auto polling_started = std::chrono::steady_clock::now();
  for (;;) {
    const Result<bool> done = test();
    if (!done.ok()) return done.error();
    if (done.value()) return Status::success();
    if (deadline.passed()) break;
    if (std::chrono::steady_clock::now() - polling_started < kPollOnly) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kLongestSleep);
    }
  }
  const std::string payload = payload_bytes > 0 ? " of " + planner::format_bytes(static_cast<int64_t>(payload_bytes)) : "";
  return make_error(ErrorCode::comm_error, std::string(mpi_call) + payload + " did not complete within " + seconds_text(deadline.timeout()) +
                                               " (--comm-timeout); another rank has died or is stuck, or did not make this call");
}

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
