#include "interleaving_choice.h"

#include <algorithm>

namespace tessera::planner::search_detail {

size_t predicted_best_chunk_index(const std::vector<int64_t>& counts, int64_t pp, double one_f_one_b_bubble_s, double send_s) {
  const auto stages = static_cast<double>(pp);
  const double passes_s = std::max(0.0, one_f_one_b_bubble_s - 2 * (stages - 1) * send_s);
  size_t best = 0;
  double best_s = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto v = static_cast<double>(counts[i]);
    const double bubble_s = passes_s / v + 2 * (stages * v - 1) * send_s;
    if (i == 0 || bubble_s < best_s) {
      best = i;
      best_s = bubble_s;
    }
  }
  return best;
}

}  // namespace tessera::planner::search_detail
