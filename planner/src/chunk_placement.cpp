#include "tessera/planner/chunk_placement.h"

#include "tessera/planner/gemini_gathering.h"

namespace tessera::planner {

std::vector<ChunkPlacement> gemini_chunk_placement(const GeminiSummary& g, int64_t dp) {
  const int64_t n = static_cast<int64_t>(g.chunk_used.size());
  const std::vector<bool> kept = g.chunks_of_layer.empty() ? std::vector<bool>(static_cast<size_t>(n), false) : gathered_after_forward(g.chunk_set());
  std::vector<ChunkPlacement> out;
  out.reserve(g.chunk_used.size());
  for (int64_t i = 0; i < n; ++i) {
    ChunkPlacement c;
    const int64_t capacity = g.chunk_capacity[static_cast<size_t>(i)];
    c.used_elements = g.chunk_used[static_cast<size_t>(i)];
    c.padding_elements = capacity - c.used_elements;
    c.shard_elements = capacity / dp;
    c.kept_gathered = kept[static_cast<size_t>(i)];
    c.parameters = g.parameter_chunk_on_host(static_cast<size_t>(i)) ? MemorySpace::host : MemorySpace::device;
    c.optimizer_states = g.optimizer_chunk_on_host(static_cast<size_t>(i)) ? MemorySpace::host : MemorySpace::device;
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera::planner
