// Failures counted per rank in the multi-rank test programs (run under
// mpirun, outside GoogleTest): each failed expectation prints one line naming
// the rank and the test's line, and the program exits non-zero at the end.
#pragma once

#include <cstdio>
#include <source_location>
#include <string>

#include "tessera/planner/status.h"

namespace tessera::testing {

class RankChecker {
 public:
  explicit RankChecker(int rank) : rank_(rank) {}
  void expect(bool condition, const std::string& what, std::source_location where = std::source_location::current()) {
    if (condition) return;
    ++failures_;
    std::fprintf(stderr, "rank %d: FAILED %s (line %u)\n", rank_, what.c_str(), static_cast<unsigned>(where.line()));
  }
  void expect_ok(const Status& status, const std::string& what, std::source_location where = std::source_location::current()) {
    expect(status.ok(), what + (status.ok() ? "" : ": " + status.error().message), where);
  }
  int failures() const { return failures_; }

 private:
  int rank_ = 0;
  int failures_ = 0;
};

}  // namespace tessera::testing
