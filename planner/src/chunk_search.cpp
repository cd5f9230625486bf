// ColossalAI's chunk-size search, as search_chunk_configuration does it in
// hpcaitech/ColossalAI v0.5.0 (d322ff8c), colossalai/zero/gemini/chunk/
// search_utils.py, with the defaults GeminiPlugin passes (search_range_m 32,
// min_chunk_size_m 32, search interval hidden_dim or 1024 from
// chunk/utils.py init_chunk_manager, filter_exlarge_params True).
#include <algorithm>
#include <cmath>

#include "tessera/planner/chunks.h"

namespace tessera::planner {

std::vector<int64_t> chunk_search_sizes(const TensorInventory& inventory) {
  std::vector<int64_t> sizes;
  for (const int i : packing_order(inventory)) sizes.push_back(inventory.tensors[static_cast<size_t>(i)].numel());
  if (sizes.empty()) return sizes;
  // numpy's mean and std (population, ddof 0), two passes as np.std does.
  double mean = 0;
  for (int64_t s : sizes) mean += static_cast<double>(s);
  mean /= static_cast<double>(sizes.size());
  double variance = 0;
  for (int64_t s : sizes) variance += (static_cast<double>(s) - mean) * (static_cast<double>(s) - mean);
  const double upper_limit = mean + 3 * std::sqrt(variance / static_cast<double>(sizes.size()));
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int64_t s) { return static_cast<double>(s) > upper_limit; }), sizes.end());
  return sizes;
}

int64_t unused_elements(const std::vector<int64_t>& sizes, int64_t chunk_size) {
  int64_t waste = 0, left = 0;
  for (int64_t s : sizes) {
    if (s > left) {
      waste += left;
      left = chunk_size;
    }
    left -= s;
  }
  return waste + left;
}

namespace {

struct Packing {
  int64_t waste = 0;
  int64_t next_change = -1;  // the smallest size at which some chunk takes the next one's first tensor; -1: one chunk
};

// A greedy packing of sizes (each at most chunk_size) and where it next changes.
Packing pack_sizes(const std::vector<int64_t>& sizes, int64_t chunk_size) {
  Packing p;
  int64_t used = 0;
  bool any = false;
  for (int64_t s : sizes) {
    if (!any || used + s > chunk_size) {
      if (any) {
        p.waste += chunk_size - used;
        const int64_t absorbs_at = used + s;
        if (p.next_change < 0 || absorbs_at < p.next_change) p.next_change = absorbs_at;
      }
      used = 0;
      any = true;
    }
    used += s;
  }
  p.waste += any ? chunk_size - used : 0;
  return p;
}

}  // namespace

// Within a range of sizes where the greedy packing does not change, the waste
// n·C − total grows with C, so only the first grid size of each such range can
// be best. Jumping from one packing change to the next visits a few hundred
// packings instead of every size on the grid, and picks the same size as trying
// them all (the first, that is smallest, size with the least waste).
int64_t search_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp) {
  const int64_t mebi = int64_t{1} << 20;
  const int64_t min_chunk = std::llround(options.min_chunk_size_m * static_cast<double>(mebi));
  const int64_t range = std::llround(options.search_range_m * static_cast<double>(mebi));
  const int64_t interval = std::max<int64_t>(1, options.search_interval);
  const std::vector<int64_t> sizes = chunk_search_sizes(inventory);
  int64_t max_size = min_chunk;
  for (int64_t s : sizes) max_size = std::max(max_size, s);
  const int64_t start = (max_size + interval - 1) / interval * interval;
  const auto grid_at_or_above = [&](int64_t size) { return start + (std::max<int64_t>(0, size - start) + interval - 1) / interval * interval; };
  int64_t best = start, best_waste = -1;
  for (int64_t size = start; size <= start + range;) {
    const Packing packing = pack_sizes(sizes, size);
    if (best_waste < 0 || packing.waste < best_waste) {
      best_waste = packing.waste;
      best = size;
    }
    if (packing.next_change < 0) break;  // one chunk: larger sizes only add waste
    size = grid_at_or_above(std::max(packing.next_change, size + 1));
  }
  return (best + dp - 1) / dp * dp;
}

}  // namespace tessera::planner
