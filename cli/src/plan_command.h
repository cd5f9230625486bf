// `tessera plan`: search every plugin and layout, print the best, write plan.json.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

#include "tessera/planner/search.h"

namespace tessera::cli {

struct PlanOptions {
  std::string model;
  std::string cluster;  // a shipped cluster or a cluster file; else the four options below
  std::string gpu = "h100-80g";
  int64_t gpus = 8;
  int64_t gpus_per_node = 8;
  double inter_node_gbps = 400;
  int64_t global_batch = 0;
  int64_t seq = 1024;
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  std::string activation_profile = "flash";
  bool torch_compile = false;
  std::string memory_headroom = "0";  // GiB, or a percentage with %
  std::string transformers_version;   // empty: the measured release
  std::string runtime = "colossalai";  // whose model states, and so which plugins the search tries
  std::string plugin;     // restrict to one plugin
  std::string recompute;  // restrict to one mode
  int64_t recompute_num_layers = 0;  // with --recompute full: blocks per chunk recomputed whole
  int64_t dp = 0, tp = 0, pp = 0, cp = 0, dp_replicate = 1, micro_batch = 0;
  int64_t chunk_size = 0;  // gemini: elements per chunk, 0 = ColossalAI's search
  bool pin_memory = true;  // gemini: ColossalAI's pin_memory
  std::string sequence_parallel = "on";
  int zero_stage = -1;
  std::string pp_schedule;  // empty: 1f1b and interleaved
  bool grad_reduce_in_bf16 = false;  // --runtime megatron: on every candidate
  bool fp8_param_gather = false;
  bool fused_rmsnorm = false;  // --runtime torchtitan: on every candidate
  bool compile_model_only = false;
  int top = 5;
  std::string format = "table";
  std::string output;  // empty: plan.json, or with --format json no file
};

void add_plan_options(CLI::App& command, PlanOptions& options);
int run_plan(const PlanOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
