#include "tessera/planner/recompute_blocks.h"

#include <algorithm>

namespace tessera::planner {

bool block_recomputed_whole(BlockRecompute r, int64_t index_in_chunk) {
  if (r.mode != RecomputeMode::full) return false;
  return r.num_layers == 0 || index_in_chunk < r.num_layers;
}

int64_t blocks_recomputed_whole(BlockRecompute r, int64_t chunk_layers) {
  if (r.mode != RecomputeMode::full) return 0;
  return r.num_layers == 0 ? chunk_layers : std::min(chunk_layers, r.num_layers);
}

int64_t blocks_recomputed_whole(BlockRecompute r, std::span<const StageLayers> chunks) {
  int64_t blocks = 0;
  for (const StageLayers& chunk : chunks) blocks += blocks_recomputed_whole(r, chunk.num_layers);
  return blocks;
}

std::vector<int64_t> partial_recompute_counts(Runtime runtime, int64_t num_layers, int64_t largest_chunk) {
  std::vector<int64_t> counts;
  if (runtime == Runtime::megatron) {
    for (int64_t k = 1; k < largest_chunk; ++k) counts.push_back(k);
  } else if (runtime == Runtime::torchtitan) {
    for (int64_t n = num_layers; n >= 2; --n) {
      const int64_t k = num_layers / n;
      if (k > 0 && (counts.empty() || counts.back() != k)) counts.push_back(k);
    }
  }
  return counts;
}

std::optional<int64_t> layer_checkpoint_frequency(int64_t num_layers, int64_t blocks) {
  for (int64_t n = 2; n <= num_layers; ++n) {
    if (num_layers / n == blocks) return n;
  }
  return std::nullopt;
}

std::string describe_recompute(const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  std::string text(enum_name(t.recompute));
  if (t.recompute != RecomputeMode::full || t.recompute_num_layers == 0) return text;
  const char* per = r.plugin.model_chunks() > 1 ? " per model chunk" : r.layout.pp > 1 ? " per stage" : "";
  return text + " (" + std::to_string(t.recompute_num_layers) + (t.recompute_num_layers == 1 ? " block" : " blocks") + per + ")";
}

}  // namespace tessera::planner
