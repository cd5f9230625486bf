// The `tessera` command: verbs that parse options into the planner's structs and
// call the library. Errors reach the user as one line on stderr, exit code 2.
#pragma once

#include <iosfwd>

namespace CLI {
class App;
}

namespace tessera::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;  // usage and input errors

// Every integer option of `app` and its subcommands, whatever its type, reads
// its text as a decimal whole number within the type's range (int64 or
// uint64) and refuses anything else, where CLI11 alone would saturate.
void check_integer_options(CLI::App& app);

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
