// Which parts of which parameters each rank's optimizer holds, for every
// plugin: the one rule the engine's strategies build their optimizers with and
// a checkpoint saved under one layout is re-sharded into another with.
//  - torch_ddp (and a single rank): every parameter whole, in flat order;
//  - low_level_zero: the padded flat buffer's rank-th shard (sharding.h);
//  - torch_fsdp: the rank-th shard of each unit (fsdp_layout);
//  - gemini: the rank-th slot of each chunk (pack_chunks at the plan's chunk
//    size; a chunk of capacity c has slots of c / dp), chunk after chunk.
// A piece's offset_in_shard is where it sits in the rank's optimizer states.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/model.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct OptimizerLayout {
  std::vector<ShardPiece> pieces;
  int64_t shard_numel = 0;  // elements of the rank's optimizer states (padding included)
};

OptimizerLayout optimizer_layout(const Model& model, const PluginOptions& plugin, int64_t dp, int64_t rank);

// Gemini's chunks: which flat parameters each holds, at which offset.
struct ChunkContents {
  std::vector<int> parameters;   // flat-order indices, in packing order
  std::vector<int64_t> offsets;  // of each, in the chunk
  int64_t capacity = 0;          // elements of the chunk (a multiple of dp)
  int64_t shard_offset = 0;      // where its slot starts in a rank's optimizer states
};
std::vector<ChunkContents> chunk_contents(const Model& model, int64_t chunk_size, int64_t dp);

}  // namespace tessera::planner
