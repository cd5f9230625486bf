// One function per verb; each returns the process exit code.
#pragma once

#include <iosfwd>

#include "estimate_options.h"

namespace tessera::cli {

struct ListOptions {
  std::string format = "table";  // table or json
  std::string profile;           // gpus: print this GPU's whole profile ("cpu": this host's) as a --gpu file
};

int run_models(const ListOptions& options, std::ostream& out, std::ostream& err);
int run_gpus(const ListOptions& options, std::ostream& out, std::ostream& err);
int run_estimate(EstimateOptions& options, std::ostream& out, std::ostream& err);

// Writes `text` to `path` through a unique temporary file beside it (mode
// 0666 less the umask, synced) and a rename, so that a failed write never
// leaves a truncated file behind. Only a regular file at `path` is replaced: a
// symlink, device, FIFO or directory there is refused. Errors start with
// `field`, the option or file the path came from.
Status write_file_atomically(const std::string& path, const std::string& text, const std::string& field = "--output");

}  // namespace tessera::cli
