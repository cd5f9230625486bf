// `tessera export PLAN.json --to colossalai|deepspeed|megatron|torchtitan|perfetto`:
// one plan of a plan file as a ColossalAI script, a DeepSpeed config, a Megatron-LM
// launch script, a torchtitan job config or a Perfetto trace (export.h).
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct ExportOptions {
  std::string plan_file;
  std::string to;
  int64_t plan = 1;     // 1 = the best plan
  std::string output;   // empty: standard output
};

void add_export_options(CLI::App& command, ExportOptions& options);
int run_export(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
