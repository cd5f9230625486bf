// One function per verb; each returns the process exit code.
#pragma once

#include <iosfwd>

#include "estimate_options.h"

namespace tessera::cli {

struct ListOptions {
  std::string format = "table";  // table or json
};

int run_models(const ListOptions& options, std::ostream& out, std::ostream& err);
int run_gpus(const ListOptions& options, std::ostream& out, std::ostream& err);
int run_estimate(EstimateOptions& options, std::ostream& out, std::ostream& err);

// Writes `text` to `path` through a temporary file and a rename, so that a
// failed write never leaves a truncated report behind.
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace tessera::cli
