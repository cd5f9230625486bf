// Waiting for another rank without waiting forever (issue 16's
// --comm-timeout), for every backend that waits: a call's deadline, and the
// polling loop that gives up when it passes. The MPI backend polls MPI_Test
// (mpi_wait.h), the NCCL backend cudaEventQuery and ncclCommGetAsyncError
// (nccl.cpp). Private to the backends.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <thread>

#include "tessera/planner/report.h"
#include "tessera/planner/status.h"

namespace tessera::engine::comm {

// "300 s", "0.5 s": a timeout as messages show it.
inline std::string seconds_text(std::chrono::duration<double> seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds.count());
  return text;
}

// A timeout a backend is given: above 0 (NaN is not; an infinite one never
// expires), else invalid_argument naming --comm-timeout.
inline Status positive_timeout(std::chrono::duration<double> timeout) {
  if (timeout.count() > 0) return Status::success();
  return make_error(ErrorCode::invalid_argument,
                    "a communication timeout of " + seconds_text(timeout) + " is not positive; give --comm-timeout a number of seconds above 0");
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
// CommCounters counts it (0: not named). `operation` (the MPI or NCCL call waited for) is read when the deadline
// passes: a call of several exchanges names the one it was waiting on.
template <typename Test>
Status poll_until_done(Test test, const Deadline& deadline, const char* const& operation, size_t payload_bytes) {
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
  return make_error(ErrorCode::comm_error, std::string(operation) + payload + " did not complete within " + seconds_text(deadline.timeout()) +
                                               " (--comm-timeout); another rank has died or is stuck, or did not make this call");
}

}  // namespace tessera::engine::comm
