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

bool colossalai_pipelines_checkpoint_some_blocks(const ModelConfig& config) {
  return config.family == ModelFamily::llama || config.family == ModelFamily::mistral || config.family == ModelFamily::qwen2;
}

bool colossalai_checkpoints_some_blocks(const ModelConfig& config, const EstimateRequest& r) {
  return r.plugin.kind == PluginKind::hybrid_parallel && r.layout.pp > 1 && colossalai_pipelines_checkpoint_some_blocks(config);
}

std::vector<int64_t> partial_recompute_counts(const ModelConfig& config, const EstimateRequest& r) {
  const int64_t num_layers = config.num_layers;
  std::vector<int64_t> counts;
  if (r.plugin.runtime == Runtime::torchtitan) {
    for (int64_t n = num_layers; n >= 2; --n) {
      const int64_t k = num_layers / n;
      if (k > 0 && (counts.empty() || counts.back() != k)) counts.push_back(k);
    }
    return counts;
  }
  const bool any = r.plugin.runtime == Runtime::megatron || (r.plugin.runtime == Runtime::colossalai && colossalai_checkpoints_some_blocks(config, r));
  if (!any) return counts;
  int64_t largest_chunk = 0;
  for (const auto& stage : stage_chunks(static_cast<int>(num_layers), static_cast<int>(r.layout.pp), static_cast<int>(r.plugin.model_chunks()))) {
    for (const StageLayers& chunk : stage) largest_chunk = std::max<int64_t>(largest_chunk, chunk.num_layers);
  }
  for (int64_t k = 1; k < largest_chunk; ++k) counts.push_back(k);
  return counts;
}

std::optional<int64_t> layer_checkpoint_frequency(int64_t num_layers, int64_t blocks) {
  for (int64_t n = 2; n <= num_layers; ++n) {
    if (num_layers / n == blocks) return n;
  }
  return std::nullopt;
}

std::optional<std::string> torchtitan_count_refusal(const ModelConfig& config, const EstimateRequest& r) {
  const int64_t blocks = r.training.recompute_num_layers, num_layers = config.num_layers;
  if (r.plugin.runtime != Runtime::torchtitan || r.training.recompute != RecomputeMode::full || blocks == 0 || blocks >= num_layers) return std::nullopt;
  if (layer_checkpoint_frequency(num_layers, blocks)) return std::nullopt;
  std::string counts;
  for (int64_t k : partial_recompute_counts(config, r)) counts += (counts.empty() ? "" : ", ") + std::to_string(k);
  return "--recompute-num-layers " + std::to_string(blocks) + ": torchtitan's selective_ac_option n recomputes every n-th block, ⌊" +
         std::to_string(num_layers) + "/n⌋ of the " + std::to_string(num_layers) + "; use one of " + counts + ", or 0 for every block";
}

std::string describe_recompute(const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  std::string text(enum_name(t.recompute));
  if (t.recompute != RecomputeMode::full || t.recompute_num_layers == 0) return text;
  const char* per = r.plugin.model_chunks() > 1 ? " per model chunk" : r.layout.pp > 1 ? " per stage" : "";
  return text + " (" + std::to_string(t.recompute_num_layers) + (t.recompute_num_layers == 1 ? " block" : " blocks") + per + ")";
}

}  // namespace tessera::planner
