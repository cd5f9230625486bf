// A rank's optimizer values, laid out by its pieces (planner/optimizer_layout.h),
// and the whole model's in flat order: checkpoints gather shards into whole
// tensors (parallel/rank_reports.h), and a one-rank Gemini run on a GPU,
// whose shard holds every parameter at its chunk's offsets, saves and
// resumes as a one-rank run writes (flat_checkpoint.h). The shard's padding
// is not touched.
#pragma once

#include <algorithm>
#include <vector>

#include "tessera/planner/sharding.h"

namespace tessera::engine {

inline void shard_values_to_flat(const std::vector<planner::ShardPiece>& pieces, const std::vector<planner::FlatParameter>& order, const float* shard,
                                 float* flat) {
  for (const planner::ShardPiece& piece : pieces) {
    std::copy_n(shard + piece.offset_in_shard, piece.numel, flat + order[static_cast<size_t>(piece.parameter)].offset + piece.offset_in_parameter);
  }
}

inline void flat_values_to_shard(const std::vector<planner::ShardPiece>& pieces, const std::vector<planner::FlatParameter>& order, const float* flat,
                                 float* shard) {
  for (const planner::ShardPiece& piece : pieces) {
    std::copy_n(flat + order[static_cast<size_t>(piece.parameter)].offset + piece.offset_in_parameter, piece.numel, shard + piece.offset_in_shard);
  }
}

}  // namespace tessera::engine
