#include "tessera/planner/chunk_placement.h"

#include <cmath>

namespace tessera::planner {

namespace {

int64_t whole_chunks(double fraction, int64_t num_chunks) {
  return static_cast<int64_t>(std::llround(fraction * static_cast<double>(num_chunks)));
}

}  // namespace

std::vector<ChunkPlacement> gemini_chunk_placement(const GeminiSummary& g, int64_t dp) {
  const int64_t n = static_cast<int64_t>(g.chunk_used.size());
  const int64_t gathered = whole_chunks(1 - g.shard_param_frac, n);
  const int64_t params_on_host = whole_chunks(g.offload_param_frac, n - gathered);
  const int64_t optimizer_on_host = whole_chunks(g.offload_optim_frac, n);
  std::vector<ChunkPlacement> out;
  out.reserve(g.chunk_used.size());
  for (int64_t i = 0; i < n; ++i) {
    ChunkPlacement c;
    const int64_t capacity = g.chunk_capacity[static_cast<size_t>(i)];
    c.used_elements = g.chunk_used[static_cast<size_t>(i)];
    c.padding_elements = capacity - c.used_elements;
    c.sharded = i >= gathered;
    c.shard_elements = c.sharded ? capacity / dp : capacity;
    // Offloaded parameter chunks are the last sharded ones: the device's share is filled first.
    c.parameters = c.sharded && i >= n - params_on_host ? MemorySpace::host : MemorySpace::device;
    c.optimizer_states = i < optimizer_on_host ? MemorySpace::host : MemorySpace::device;
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera::planner
