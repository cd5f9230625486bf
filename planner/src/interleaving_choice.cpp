#include "interleaving_choice.h"

#include <algorithm>

namespace tessera::planner::search_detail {

std::vector<int64_t> chunk_counts_by_predicted_bubble(std::vector<int64_t> counts, int64_t pp, double one_f_one_b_bubble_s, double send_s) {
  const auto stages = static_cast<double>(pp);
  const double passes_s = std::max(0.0, one_f_one_b_bubble_s - 2 * (stages - 1) * send_s);
  const auto bubble_s = [&](int64_t chunks) {
    const auto v = static_cast<double>(chunks);
    return passes_s / v + 2 * (stages * v - 1) * send_s;
  };
  std::stable_sort(counts.begin(), counts.end(), [&](int64_t a, int64_t b) { return bubble_s(a) < bubble_s(b); });
  return counts;
}

}  // namespace tessera::planner::search_detail
