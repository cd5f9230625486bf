// A measured run (metrics.json, written by `tessera train`) read back for
// comparison with the planner's prediction of the same set-up: per memory
// category, predicted against measured bytes and the error. `tessera compare`
// prints the same figures.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct MeasuredRun {
  std::string model_name;    // the "model" object's name
  EstimateRequest request;   // the set-up the run used
  MemoryBreakdown memory;    // peak per category of the first rank row, device and host
  double tokens_per_s = 0;
};

Result<MeasuredRun> parse_measured_run(std::string_view text, const std::string& source);
Result<MeasuredRun> read_measured_run(const std::string& path);

// The first rank row of a plan file's best plan, or of an estimate (as
// `tessera estimate --format json` and `tessera train` write it), and its model's name.
struct PredictedRun {
  std::string model_name;
  MemoryBreakdown memory;
};
Result<PredictedRun> read_predicted_run(const std::string& path);

struct CategoryError {
  MemoryCategory category = MemoryCategory::parameters;
  int64_t predicted_bytes = 0;  // device
  int64_t measured_bytes = 0;   // device
  // (predicted - measured) / measured in percent; 0 when both are 0, 100 when only the prediction is.
  double error_pct = 0;
};

// Every category's device bytes, in the order of kAllMemoryCategories.
std::vector<CategoryError> compare_memory(const MemoryBreakdown& predicted, const MemoryBreakdown& measured);

}  // namespace tessera::planner
