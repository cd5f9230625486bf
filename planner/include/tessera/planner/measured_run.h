// A measured run (metrics.json, written by `tessera train`) and a prediction
// (a plan or estimate file) read back for comparison: every rank row of each,
// with device and host bytes per memory category. `tessera compare` and the
// GUI put the two side by side (memory_comparison.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/memory_comparison.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct MeasuredRun {
  std::string model_name;    // the "model" object's name
  int64_t parameter_count = 0;  // its "parameter_count" (0: not given)
  EstimateRequest request;   // the set-up the run used
  std::vector<RankRow> ranks;  // one row per rank (first_rank == last_rank), in rank order; never empty
  double tokens_per_s = 0;
  std::string device;          // where it ran: "cpu", or a GPU's name ("device" of metrics.json)
  // Per step, in step order (empty where the file has none):
  std::vector<double> loss;         // mean loss of the step's micro-batches
  std::vector<double> grad_norm;    // NaN where an fp16 step was skipped (null in the file)
  std::vector<double> step_time_s;
};

Result<MeasuredRun> parse_measured_run(std::string_view text, const std::string& source);
Result<MeasuredRun> read_measured_run(const std::string& path);

// The rank rows of a plan of a plan file (`plan_index`, 0-based: the best
// first), or of an estimate (as `tessera estimate --format json` and `tessera
// train` write it), and its model's name.
struct PredictedRun {
  std::string model_name;
  int64_t parameter_count = 0;  // the "model" object's "parameter_count" (0: not given)
  std::vector<RankRow> ranks;  // each covering a range of ranks, in rank order; never empty
};
Result<PredictedRun> read_predicted_run(const std::string& path, size_t plan_index = 0);

}  // namespace tessera::planner
