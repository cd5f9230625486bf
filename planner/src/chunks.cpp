#include "tessera/planner/chunks.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace tessera::planner {

int64_t ChunkLayout::waste_elements() const {
  int64_t waste = 0;
  for (int64_t used : chunk_used) waste += chunk_size - used;
  return waste;
}

ChunkLayout pack_chunks(const TensorInventory& inventory, int64_t chunk_size) {
  ChunkLayout layout;
  layout.chunk_size = chunk_size;
  layout.tensor_chunk.assign(inventory.tensors.size(), -1);
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    const TensorInfo& t = inventory.tensors[i];
    if (t.tied_to >= 0) continue;
    const int64_t n = t.numel();
    if (layout.chunk_used.empty() || layout.chunk_used.back() + n > chunk_size) layout.chunk_used.push_back(0);
    layout.chunk_used.back() += n;
    layout.tensor_chunk[i] = static_cast<int>(layout.chunk_used.size()) - 1;
  }
  return layout;
}

int64_t chunk_waste_elements(const TensorInventory& inventory, int64_t chunk_size) {
  int64_t waste = 0, left = 0;
  bool any = false;
  for (const TensorInfo& t : inventory.tensors) {
    if (t.tied_to >= 0) continue;
    const int64_t n = t.numel();
    if (!any || n > left) {
      if (any) waste += left;
      left = chunk_size;
      any = true;
    }
    left -= n;
  }
  return waste + (any ? left : 0);
}

// Within a range of sizes where the greedy packing does not change, the waste
// n·C − total grows with C, so only the first grid size of each such range can
// be best. The packing changes first where some chunk can take the next
// chunk's first tensor: at min_i(used_i + first tensor of chunk i+1). Jumping
// from one such size to the next visits a few hundred packings instead of every
// size on the grid, and picks the same size as trying them all (the smallest
// size with the least waste).
int64_t search_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp) {
  const int64_t mebi = int64_t{1} << 20;
  const int64_t min_chunk = std::llround(options.min_chunk_size_m * static_cast<double>(mebi));
  const int64_t range = std::llround(options.search_range_m * static_cast<double>(mebi));
  const int64_t interval = std::max<int64_t>(1, options.search_interval);
  const int64_t start_floor = std::max(inventory.largest_tensor_numel(), min_chunk);
  const int64_t start = (start_floor + interval - 1) / interval * interval;
  const auto grid_at_or_above = [&](int64_t size) { return start + (std::max<int64_t>(0, size - start) + interval - 1) / interval * interval; };
  int64_t best = start, best_waste = -1;
  for (int64_t size = start; size <= start + range;) {
    const ChunkLayout layout = pack_chunks(inventory, size);
    const int64_t waste = layout.waste_elements();
    if (best_waste < 0 || waste < best_waste) {
      best_waste = waste;
      best = size;
    }
    // The first tensor of each chunk: where the next packing change comes from.
    int64_t next_change = -1;
    int previous_chunk = -1;
    for (size_t i = 0; i < inventory.tensors.size(); ++i) {
      const int chunk = layout.tensor_chunk[i];
      if (chunk <= previous_chunk) continue;  // a tied alias (-1) or a tensor inside the same chunk
      if (chunk > 0) {
        const int64_t absorbs_at = layout.chunk_used[static_cast<size_t>(chunk - 1)] + inventory.tensors[i].numel();
        if (next_change < 0 || absorbs_at < next_change) next_change = absorbs_at;
      }
      previous_chunk = chunk;
    }
    if (next_change < 0) break;  // one chunk: larger sizes only add waste
    size = grid_at_or_above(std::max(next_change, size + 1));
  }
  return (best + dp - 1) / dp * dp;
}

int64_t gemini_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp) {
  return options.chunk_size > 0 ? options.chunk_size : search_chunk_size(inventory, options, dp);
}

int64_t peak_chunks_per_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers) {
  // Layers run from kEmbeddingLayer (-1) to num_layers (the head); slot = layer + 1.
  // Packing is contiguous in execution order, so a chunk held across layers holds
  // tensors of each of them and is counted at each; a tied head re-gathers the
  // embedding's chunk only at the head.
  std::vector<std::set<int>> touched(static_cast<size_t>(num_layers) + 2);
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    const TensorInfo& t = inventory.tensors[i];
    const int chunk = layout.tensor_chunk[t.tied_to >= 0 ? static_cast<size_t>(t.tied_to) : i];
    touched[static_cast<size_t>(t.layer + 1)].insert(chunk);
  }
  size_t peak = 0;
  for (const auto& chunks : touched) peak = std::max(peak, chunks.size());
  return static_cast<int64_t>(peak);
}

}  // namespace tessera::planner
