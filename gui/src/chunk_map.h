// What the ZeRO / chunks view draws: the model's parameters packed into
// Gemini chunks in execution order, each chunk's padding, its shards over the
// data-parallel ranks and where it lives. For a Gemini plan these are the
// plan's own chunks and placement; for any other plan, the packing Gemini
// would use at its searched chunk size (all on the GPU), so the waste of
// chunking this model is visible either way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner_session.h"
#include "tessera/planner/chunk_placement.h"

namespace tessera::gui {

struct ChunkMap {
  bool plan_uses_chunks = false;
  std::string plan_description;
  std::string placement;                     // "static (optim 25%, param 0% on host)"
  int64_t chunk_size = 0;                    // elements
  int64_t bytes_per_element = 2;             // 16-bit parameters (4 in fp32)
  int64_t dp = 1;                            // ranks sharing each sharded chunk
  int64_t waste_elements = 0;
  std::vector<planner::ChunkPlacement> chunks;
  std::vector<std::vector<std::string>> tensors;  // per chunk, the tensors packed into it
};

ChunkMap make_chunk_map(const planner::Model& model, const ShownPlan& plan);

}  // namespace tessera::gui
