#include "tessera/planner/gemini_static_placement.h"

#include <algorithm>

namespace tessera::planner {

namespace {

// total_chunk_mem of setup_grads_device, in elements: each tensor (tied
// aliases are one parameter) adds its chunk's capacity.
double counted_chunk_elements(const ChunkLayout& layout) {
  double total = 0;
  for (const int chunk : layout.tensor_chunk) {
    if (chunk >= 0) total += static_cast<double>(layout.chunk_capacity[static_cast<size_t>(chunk)]);
  }
  return total;
}

}  // namespace

int64_t offloaded_optimizer_chunks(const ChunkLayout& layout, double offload_optim_frac) {
  const double target = offload_optim_frac * counted_chunk_elements(layout);
  double offloaded = 0;
  int64_t chunks = 0;
  for (const int64_t capacity : layout.chunk_capacity) {
    if (offloaded >= target) break;
    offloaded += static_cast<double>(capacity);
    ++chunks;
  }
  return chunks;
}

int64_t optimizer_chunks_on_host(const ChunkLayout& layout, const GeminiOptions& gemini) {
  switch (gemini.placement_policy) {
    case GeminiPlacement::cpu: return layout.num_chunks();
    case GeminiPlacement::static_placement: return offloaded_optimizer_chunks(layout, gemini.offload_optim_frac);
    case GeminiPlacement::cuda:
    case GeminiPlacement::auto_placement: return 0;
  }
  return 0;
}

int64_t leading_chunk_elements(const ChunkLayout& layout, int64_t chunks) {
  const auto end = layout.chunk_capacity.begin() + std::clamp<int64_t>(chunks, 0, layout.num_chunks());
  int64_t elements = 0;
  for (auto it = layout.chunk_capacity.begin(); it != end; ++it) elements += *it;
  return elements;
}

double offload_optim_frac_for(const ChunkLayout& layout, int64_t chunks) {
  if (chunks <= 0) return 0;
  if (chunks >= layout.num_chunks()) return 1;
  const double between = 0.5 * static_cast<double>(leading_chunk_elements(layout, chunks - 1) + leading_chunk_elements(layout, chunks));
  return between / counted_chunk_elements(layout);
}

double kept_gathered_elements(const ChunkLayout& layout, const GeminiOptions& gemini) {
  if (gemini.placement_policy != GeminiPlacement::static_placement) return 0;
  return (1 - gemini.shard_param_frac) * counted_chunk_elements(layout);
}

std::vector<bool> parameter_chunks_on_host(const ChunkLayout& layout, const GeminiOptions& gemini) {
  const size_t n = static_cast<size_t>(layout.num_chunks());
  switch (gemini.placement_policy) {
    case GeminiPlacement::cpu: return std::vector<bool>(n, true);
    case GeminiPlacement::cuda:
    case GeminiPlacement::auto_placement: return std::vector<bool>(n, false);
    case GeminiPlacement::static_placement: break;
  }
  const double keep_on_device = (1 - effective_offload_param_frac(gemini)) * counted_chunk_elements(layout);
  std::vector<bool> on_host(n);
  for (size_t c = 0; c < n; ++c) on_host[c] = static_cast<double>(layout.chunk_capacity[c]) > keep_on_device;
  return on_host;
}

double effective_offload_param_frac(const GeminiOptions& gemini) {
  return gemini.shard_param_frac == 1 && gemini.offload_optim_frac == 1 ? gemini.offload_param_frac : 0;
}

}  // namespace tessera::planner
