// Predicted against measured memory, per rank, per category and per memory
// space: the figures `tessera compare` prints and the GUI's measured-run view shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

// One "ranks" row of a plan, an estimate or a metrics file: the global ranks
// first..last (inclusive) and the bytes each of them holds per category.
struct RankRow {
  int64_t first_rank = 0;
  int64_t last_rank = 0;
  MemoryBreakdown memory;
};

// The planner's rows of `estimate`, as a plan file stores them.
std::vector<RankRow> rank_rows(const MemoryEstimate& estimate);

// (predicted - measured) / measured in percent; 0 when both are 0, 100 when only the prediction is.
double error_pct(int64_t predicted, int64_t measured);

struct CategoryError {
  MemoryCategory category = MemoryCategory::parameters;
  int64_t predicted_bytes = 0;  // device
  int64_t measured_bytes = 0;   // device
  double error_pct = 0;         // device
  int64_t predicted_host_bytes = 0;
  int64_t measured_host_bytes = 0;
  double host_error_pct = 0;
  bool operator==(const CategoryError&) const = default;
};

// Every category, device and host, in the order of kAllMemoryCategories.
std::vector<CategoryError> compare_memory(const MemoryBreakdown& predicted, const MemoryBreakdown& measured);

struct RankComparison {
  int64_t rank = 0;
  std::vector<CategoryError> categories;  // in the order of kAllMemoryCategories
};

// Each measured rank, in rank order, against the predicted row whose range
// holds it. A measured rank that no predicted row holds is an error naming
// both sources (file names, for the message) and the rank.
Result<std::vector<RankComparison>> compare_memory(const std::vector<RankRow>& predicted, const std::string& predicted_source,
                                                   const std::vector<RankRow>& measured, const std::string& measured_source);

// The largest |error_pct| or |host_error_pct| over every rank and category; 0 when none.
double max_abs_error_pct(const std::vector<RankComparison>& ranks);

}  // namespace tessera::planner
