// `tessera train`: train a model on the CPU and write DIR/plan.json (the
// planner's estimate of the run), DIR/metrics.json (what the engine measured).
// `tessera compare`: the two side by side, per memory category.
#pragma once

#include <iosfwd>
#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct TrainCliOptions {
  std::string model = "tiny-gpt2";
  std::string out;
  std::string data;  // default: the shipped text
  int64_t steps = 50;
  int64_t micro_batch = 4;
  int64_t seq = 64;
  int64_t micro_batches = 1;
  double learning_rate = 1e-3;
  uint64_t seed = 1;
  std::string precision = "fp32";
  std::string optimizer = "adamw";
  std::string recompute = "none";
  bool resume = false;
  int64_t save_every = 0;
  std::string plan;  // train the best plan of a plan.json instead of the options above
};

void add_train_options(CLI::App& command, TrainCliOptions& options);
int run_train(const TrainCliOptions& options, std::ostream& out, std::ostream& err);

struct CompareCliOptions {
  std::string plan;
  std::string metrics;
  std::string format = "table";
};

void add_compare_options(CLI::App& command, CompareCliOptions& options);
int run_compare(const CompareCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
