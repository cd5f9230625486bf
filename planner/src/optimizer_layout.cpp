#include "tessera/planner/optimizer_layout.h"

#include <algorithm>

#include "tessera/planner/chunks.h"

namespace tessera::planner {

std::vector<ChunkContents> chunk_contents(const Model& model, int64_t chunk_size, int64_t dp) {
  const ChunkLayout layout = pack_chunks(model.inventory, chunk_size, dp);
  const std::vector<FlatParameter> order = flat_parameter_order(model.inventory);
  std::vector<int> flat_index(model.inventory.tensors.size(), -1);
  for (size_t p = 0; p < order.size(); ++p) flat_index[static_cast<size_t>(order[p].tensor_index)] = static_cast<int>(p);
  std::vector<ChunkContents> chunks(static_cast<size_t>(layout.num_chunks()));
  int64_t shard_offset = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    chunks[c].capacity = layout.chunk_capacity[c];
    chunks[c].shard_offset = shard_offset;
    shard_offset += chunks[c].capacity / dp;
  }
  std::vector<int64_t> used(chunks.size(), 0);
  for (const int tensor : layout.packing_order) {
    const auto chunk = static_cast<size_t>(layout.tensor_chunk[static_cast<size_t>(tensor)]);
    const int p = flat_index[static_cast<size_t>(tensor)];
    chunks[chunk].parameters.push_back(p);
    chunks[chunk].offsets.push_back(used[chunk]);
    used[chunk] += order[static_cast<size_t>(p)].numel;
  }
  return chunks;
}

namespace {

OptimizerLayout gemini_layout(const Model& model, const PluginOptions& plugin, int64_t dp, int64_t rank) {
  const int64_t chunk_size = gemini_chunk_size(model.inventory, plugin.gemini, dp);
  const std::vector<FlatParameter> order = flat_parameter_order(model.inventory);
  const std::vector<ChunkContents> chunks = chunk_contents(model, chunk_size, dp);
  OptimizerLayout layout;
  for (const ChunkContents& chunk : chunks) {
    const int64_t shard = chunk.capacity / dp;
    const int64_t begin = rank * shard, end = begin + shard;  // this rank's slot of the chunk
    for (size_t j = 0; j < chunk.parameters.size(); ++j) {
      const int p = chunk.parameters[j];
      const int64_t offset = chunk.offsets[j], numel = order[static_cast<size_t>(p)].numel;
      const int64_t first = std::max(begin, offset), last = std::min(end, offset + numel);
      if (first < last) layout.pieces.push_back({p, first - offset, chunk.shard_offset + first - begin, last - first});
    }
    layout.shard_numel = chunk.shard_offset + shard;
  }
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
