// Where each Gemini chunk lives under the plan's placement, for the GUI's
// chunk map: every chunk is sharded over the data-parallel ranks; its 16-bit
// parameters (parameters_on_host) and its fp32 optimizer states (the leading
// optimizer_chunks_on_host, gemini_static_placement.h) sit on the GPU or the
// host (a chunk with them apart also keeps a host copy of its 16-bit shard:
// exchanges_through_host); and under shard_param_frac some stay gathered
// from their forward to their backward (gemini_gathering.h). The memory
// model counts the same chunks in bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/memory_model.h"

namespace tessera::planner {

struct ChunkPlacement {
  int64_t used_elements = 0;      // parameters packed into the chunk
  int64_t padding_elements = 0;   // its unused tail (chunk_size - used)
  int64_t shard_elements = 0;     // elements each data-parallel rank owns (its capacity / dp)
  bool kept_gathered = false;     // still gathered when forward ends, so backward gathers it no more
  MemorySpace parameters = MemorySpace::device;        // 16-bit parameters and gradients
  MemorySpace optimizer_states = MemorySpace::device;  // fp32 master weights and optimizer states
};

// One entry per chunk of `gemini`, in execution order; `dp` ranks share each sharded chunk.
std::vector<ChunkPlacement> gemini_chunk_placement(const GeminiSummary& gemini, int64_t dp);

}  // namespace tessera::planner
