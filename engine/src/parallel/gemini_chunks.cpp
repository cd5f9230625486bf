#include "tessera/engine/parallel/gemini_chunks.h"

#include <algorithm>
#include <utility>

#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine {

int64_t GeminiChunkPlan::shard_numel() const {
  int64_t n = 0;
  for (const GeminiChunk& c : chunks) n += c.shard;
  return n;
}

int64_t GeminiChunkPlan::host_optimizer_elements() const {
  return optimizer_chunks_on_host < static_cast<int64_t>(chunks.size()) ? chunks[static_cast<size_t>(optimizer_chunks_on_host)].shard_offset
                                                                        : shard_numel();
}

size_t GeminiChunkPlan::chunk_holding(int64_t offset_in_shard) const {
  // The last chunk whose slot starts at or before it.
  const auto after = std::upper_bound(chunks.begin(), chunks.end(), offset_in_shard,
                                      [](int64_t offset, const GeminiChunk& c) { return offset < c.shard_offset; });
  return static_cast<size_t>(std::prev(after) - chunks.begin());
}

GeminiChunkPlan gemini_chunk_plan(const planner::Model& model, const planner::GeminiOptions& gemini, int64_t dp, std::optional<int64_t> host_chunks) {
  GeminiChunkPlan plan;
  plan.layout = planner::pack_chunks(model.inventory, planner::gemini_chunk_size(model.inventory, gemini, dp), dp);
  plan.chunks_of_layer = planner::chunks_by_layer(plan.layout, model.inventory, static_cast<int>(model.config.num_layers));
  plan.kept_gathered_elements = planner::kept_gathered_elements(plan.layout, gemini);
  plan.optimizer_chunks_on_host = planner::optimizer_chunks_on_host(plan.layout, gemini);
  std::vector<bool> on_host = planner::parameter_chunks_on_host(plan.layout, gemini);
  if (host_chunks) {
    std::fill(on_host.begin(), on_host.end(), false);
    std::fill_n(on_host.begin(), std::min<int64_t>(*host_chunks, plan.layout.num_chunks()), true);
  }
  for (planner::ChunkContents& contents : planner::chunk_contents(model, plan.layout.chunk_size, dp)) {
    GeminiChunk& c = plan.chunks.emplace_back();
    c.parameters = std::move(contents.parameters);
    c.offsets = std::move(contents.offsets);
    c.shard = contents.capacity / dp;
    c.shard_offset = contents.shard_offset;
    c.on_host = on_host[plan.chunks.size() - 1];
    c.optimizer_on_host = static_cast<int64_t>(plan.chunks.size()) <= plan.optimizer_chunks_on_host;
  }
  return plan;
}

void apply_gemini_moves(const planner::GeminiGathering::Moves& moves, GeminiChunkMoves& chunks) {
  for (const int chunk : moves.reduced) {
    chunks.reduce(chunk);
    chunks.release(chunk);
  }
  for (const int chunk : moves.released) chunks.release(chunk);
  for (const int chunk : moves.gathered) chunks.gather(chunk);
  for (const int chunk : moves.gradients_opened) chunks.open_gradients(chunk);
}

void use_gemini_layer(planner::GeminiGathering& gathering, int layer, bool backward, GeminiChunkMoves& chunks) {
  apply_gemini_moves(gathering.use_layer(layer, backward), chunks);
  for (const int chunk : gathering.chunks_of_layer(layer)) chunks.bind(chunk);
}

}  // namespace tessera::engine
