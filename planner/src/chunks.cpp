#include "tessera/planner/chunks.h"

#include <algorithm>
#include <numeric>

namespace tessera::planner {

int64_t ChunkLayout::padded_elements() const { return std::accumulate(chunk_capacity.begin(), chunk_capacity.end(), int64_t{0}); }

int64_t ChunkLayout::waste_elements() const { return padded_elements() - std::accumulate(chunk_used.begin(), chunk_used.end(), int64_t{0}); }

std::vector<int> packing_order(const TensorInventory& inventory) {
  if (!inventory.module_order.empty()) return inventory.module_order;
  std::vector<int> order;
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    if (inventory.tensors[i].tied_to < 0) order.push_back(static_cast<int>(i));
  }
  return order;
}

ChunkLayout pack_chunks(const TensorInventory& inventory, int64_t chunk_size, int64_t dp) {
  ChunkLayout layout;
  layout.chunk_size = chunk_size;
  layout.tensor_chunk.assign(inventory.tensors.size(), -1);
  layout.packing_order = packing_order(inventory);
  for (const int i : layout.packing_order) {
    const int64_t n = inventory.tensors[static_cast<size_t>(i)].numel();
    if (layout.chunk_used.empty() || layout.chunk_used.back() + n > layout.chunk_capacity.back()) {
      layout.chunk_used.push_back(0);
      layout.chunk_capacity.push_back(n > chunk_size ? (n + dp - 1) / dp * dp : chunk_size);
    }
    layout.chunk_used.back() += n;
    layout.tensor_chunk[static_cast<size_t>(i)] = static_cast<int>(layout.chunk_used.size()) - 1;
  }
  return layout;
}

int64_t gemini_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp) {
  return options.chunk_size > 0 ? options.chunk_size : search_chunk_size(inventory, options, dp);
}

std::vector<std::vector<int>> chunks_by_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers) {
  // Packing is contiguous, so a chunk held across layers holds tensors of each
  // of them and is counted at each; a tied head re-gathers the embedding's
  // chunk only at the head.
  std::vector<std::vector<int>> out(static_cast<size_t>(num_layers) + 2);
  for (size_t i = 0; i < inventory.tensors.size(); ++i) {
    const TensorInfo& t = inventory.tensors[i];
    out[static_cast<size_t>(t.layer + 1)].push_back(layout.tensor_chunk[t.tied_to >= 0 ? static_cast<size_t>(t.tied_to) : i]);
  }
  for (std::vector<int>& chunks : out) {
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  }
  return out;
}

int64_t peak_chunks_per_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers) {
  size_t peak = 0;
  for (const auto& chunks : chunks_by_layer(layout, inventory, num_layers)) peak = std::max(peak, chunks.size());
  return static_cast<int64_t>(peak);
}

}  // namespace tessera::planner
