// The `tessera` command: verbs that parse options into the planner's structs and
// call the library. Errors reach the user as one line on stderr, exit code 2.
#pragma once

#include <iosfwd>

namespace tessera::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;  // usage and input errors

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
