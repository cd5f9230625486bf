#include "tessera/planner/optimizer_layout.h"

#include <algorithm>

#include "tessera/planner/chunks.h"

namespace tessera::planner {

std::vector<ChunkContents> chunk_contents(const Model& model, int64_t chunk_size) {
  const ChunkLayout layout = pack_chunks(model.inventory, chunk_size);
  const std::vector<FlatParameter> order = flat_parameter_order(model.inventory);
  std::vector<ChunkContents> chunks(static_cast<size_t>(layout.num_chunks()));
  std::vector<int64_t> used(chunks.size(), 0);
  for (size_t p = 0; p < order.size(); ++p) {
    const auto tensor = static_cast<size_t>(order[p].tensor_index);
    const auto chunk = static_cast<size_t>(layout.tensor_chunk[tensor]);
    chunks[chunk].parameters.push_back(static_cast<int>(p));
    chunks[chunk].offsets.push_back(used[chunk]);
    used[chunk] += order[p].numel;
  }
  return chunks;
}

namespace {

OptimizerLayout gemini_layout(const Model& model, const PluginOptions& plugin, int64_t dp, int64_t rank) {
  const int64_t chunk_size = gemini_chunk_size(model.inventory, plugin.gemini, dp);
  const int64_t shard = chunk_size / dp;
  const std::vector<FlatParameter> order = flat_parameter_order(model.inventory);
  const std::vector<ChunkContents> chunks = chunk_contents(model, chunk_size);
  OptimizerLayout layout;
  const int64_t begin = rank * shard, end = begin + shard;  // this rank's slot of every chunk
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (size_t j = 0; j < chunks[c].parameters.size(); ++j) {
      const int p = chunks[c].parameters[j];
      const int64_t offset = chunks[c].offsets[j], numel = order[static_cast<size_t>(p)].numel;
      const int64_t first = std::max(begin, offset), last = std::min(end, offset + numel);
      if (first < last) layout.pieces.push_back({p, first - offset, static_cast<int64_t>(c) * shard + first - begin, last - first});
    }
  }
  layout.shard_numel = static_cast<int64_t>(chunks.size()) * shard;
  return layout;
}

}  // namespace

OptimizerLayout optimizer_layout(const Model& model, const PluginOptions& plugin, int64_t dp, int64_t rank) {
  const std::vector<FlatParameter> order = flat_parameter_order(model.inventory);
  switch (plugin.kind) {
    case PluginKind::hybrid_parallel:  // its ZeRO shards as low_level_zero's (stage 0: replicated)
      if (plugin.effective_zero_stage() == 0) break;
      [[fallthrough]];
    case PluginKind::low_level_zero:
      return {shard_pieces(order, dp, rank), shard_numel(model.parameter_count, dp)};
    case PluginKind::torch_fsdp: {
      const FsdpLayout units = fsdp_layout(model.inventory, order, dp);
      return {fsdp_pieces(units, order, rank), units.shard_numel};
    }
    case PluginKind::gemini: return gemini_layout(model, plugin, dp, rank);
    case PluginKind::torch_ddp: break;
  }
  return {shard_pieces(order, 1, 0), model.parameter_count};
}

}  // namespace tessera::planner
