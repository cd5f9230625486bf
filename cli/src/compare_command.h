// `tessera compare PLAN METRICS`: the planner's prediction against a measured
// run, per rank, per memory category, on the device and on the host.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct CompareCliOptions {
  std::string plan;
  std::string metrics;
  std::string format = "table";
};

void add_compare_options(CLI::App& command, CompareCliOptions& options);
int run_compare(const CompareCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
