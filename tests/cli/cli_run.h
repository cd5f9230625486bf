// `tessera ARGS...` run in-process (run_cli), its exit code and what it
// printed on stdout and stderr.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli_app.h"

namespace tessera::cli::testing {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

inline CliRun run(std::vector<const char*> args) {
  args.insert(args.begin(), "tessera");
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(args.size()), args.data(), out, err);
  return CliRun{code, out.str(), err.str()};
}

}  // namespace tessera::cli::testing
