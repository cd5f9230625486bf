#include "tessera/planner/memory_comparison.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace tessera::planner {

std::vector<RankRow> rank_rows(const MemoryEstimate& estimate) {
  std::vector<RankRow> rows;
  for (const RankMemory& row : estimate.ranks) rows.push_back(RankRow{row.first_rank, row.last_rank, row.bytes});
  return rows;
}

double error_pct(int64_t predicted, int64_t measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : 100.0;
  return 100.0 * static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

std::vector<CategoryError> compare_memory(const MemoryBreakdown& predicted, const MemoryBreakdown& measured) {
  std::vector<CategoryError> out;
  for (MemoryCategory c : kAllMemoryCategories) {
    const SpaceBytes& p = predicted[c];
    const SpaceBytes& m = measured[c];
    out.push_back(CategoryError{c, p.device, m.device, error_pct(p.device, m.device), p.host, m.host, error_pct(p.host, m.host)});
  }
  return out;
}

Result<std::vector<RankComparison>> compare_memory(const std::vector<RankRow>& predicted, const std::string& predicted_source,
                                                   const std::vector<RankRow>& measured, const std::string& measured_source) {
  std::vector<RankComparison> out;
  for (const RankRow& row : measured) {
    for (int64_t rank = row.first_rank; rank <= row.last_rank; ++rank) {
      // The predicted rows are in rank order: the candidate is the last one starting at or before `rank`.
      const auto after = std::upper_bound(predicted.begin(), predicted.end(), rank, [](int64_t r, const RankRow& p) { return r < p.first_rank; });
      if (after == predicted.begin() || std::prev(after)->last_rank < rank) {
        const std::string span = predicted.empty() ? "has no rank rows"
                                                   : "predicts ranks " + std::to_string(predicted.front().first_rank) + "-" +
                                                         std::to_string(predicted.back().last_rank);
        return make_error(ErrorCode::invalid_argument, measured_source + " has rank " + std::to_string(rank) + ", which " + predicted_source +
                                                           " does not cover (it " + span + ")");
      }
      out.push_back(RankComparison{rank, compare_memory(std::prev(after)->memory, row.memory)});
    }
  }
  return out;
}

double max_abs_error_pct(const std::vector<RankComparison>& ranks) {
  double largest = 0;
  for (const RankComparison& rank : ranks) {
    for (const CategoryError& e : rank.categories) largest = std::max({largest, std::abs(e.error_pct), std::abs(e.host_error_pct)});
  }
  return largest;
}

}  // namespace tessera::planner
