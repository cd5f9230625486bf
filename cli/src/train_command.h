// `tessera train`: train a model on the CPU or on GPUs and write DIR/plan.json
// (the planner's estimate of the run), DIR/metrics.json (what the engine measured).
#pragma once

#include <iosfwd>
#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "estimate_options.h"
#include "tessera/engine/trainer.h"
#include "train_plan.h"

namespace tessera::cli {

// `tessera estimate`'s options (model, micro-batch, sequence, precision,
// optimizer, recompute, ...) with the engine's small defaults, plus the run's own.
struct TrainCliOptions {
  TrainCliOptions();
  EstimateOptions estimate;
  std::string out;
  std::string data;  // default: the shipped text
  int64_t steps = 50;
  double learning_rate = 1e-3;
  uint64_t seed = 1;
  double loss_scale = 65536;          // fp16: initial dynamic loss scale
  int64_t loss_scale_window = 2000;   // fp16: good steps before the scale grows
  int64_t hysteresis = 1;             // fp16: overflowing steps before the scale backs off
  bool resume = false;
  bool allow_changes = false;  // --resume with other settings than the checkpoint's
  int64_t save_every = 0;
  std::string plan;  // train the best plan of a plan.json instead of the options above
  int64_t plan_number = 1;  // --plan-number: which plan of it (1: the best)
  bool dry_run = false;  // replay one rank's allocations at the plan's full size, train nothing
  int64_t rank = 0;      // --dry-run: which rank
  double comm_timeout_s = 300;  // communicator.h's kDefaultCommTimeout: a rank waiting longer gives up
  double device_memory_mib = 0;  // a capacity for the device memory space (0: none)
  std::set<std::string> given;  // the options on the command line, e.g. "--bucket-mb"
};

// The options given on `command`'s command line, for TrainCliOptions::given.
std::set<std::string> given_options(const CLI::App& command);

void add_train_options(CLI::App& command, TrainCliOptions& options);

// What `tessera train` runs, settled in `o`: a plan file's settings where
// --plan gives one (apply_plan, the same for the CPU engine and the GPU
// step), the GPU step's defaults with --gpu, the data-parallel ranks the
// launcher started (`launched_ranks`); then each setting the engine (or the
// GPU step) does not run refused in one line naming its option, a plan's
// setting as the plan's (plan_setting_refused). Returns the plan, if any.
Result<std::optional<TrainedPlan>> settle_train_options(TrainCliOptions& o, int launched_ranks);
// The engine's options from settled ones, checked.
Result<engine::TrainOptions> engine_options(const TrainCliOptions& o);

int run_train(const TrainCliOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
