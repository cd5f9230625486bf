// `tessera compare PLAN METRICS`: the planner's prediction against a measured
// run, per rank, per memory category, on the device and on the host; or, given
// a Megatron-LM, DeepSpeed or torchtitan log, against that run (logged_run_compare.h).
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct CompareCliOptions {
  std::string plan;
  std::string metrics;  // metrics.json of tessera train, or a training log
  int plan_number = 1;  // which plan of a plan file, 1 the best
  std::string format = "table";
};

void add_compare_options(CLI::App& command, CompareCliOptions& options);
int run_compare(const CompareCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
