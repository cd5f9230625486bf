// Where each Gemini chunk lives under the plan's placement: which chunks stay
// gathered on every rank, which are sharded over the data-parallel ranks, and
// whether a chunk's 16-bit parameters and its fp32 optimizer states sit on the
// GPU or the host. The memory model (memory_model.cpp) counts the same
// fractions in bytes; this spells them out chunk by chunk for the GUI's chunk map.
//
// Order, after ColossalAI's StaticPlacementPolicy (zero/gemini/placement_policy.py),
// which visits the chunks in execution order: the first (1 - shard_param_frac)
// of the chunks are kept gathered; the parameter chunks that fill the device's
// share (1 - offload_param_frac) come next and the rest go to the host; the
// first offload_optim_frac of the chunks have their optimizer states on the host.
// Fractions become whole chunks by rounding to the nearest.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/memory_model.h"

namespace tessera::planner {

struct ChunkPlacement {
  int64_t used_elements = 0;      // parameters packed into the chunk
  int64_t padding_elements = 0;   // its unused tail (chunk_size - used)
  bool sharded = true;            // false: kept gathered on every rank
  int64_t shard_elements = 0;     // elements each data-parallel rank owns (chunk_size / dp; chunk_size when gathered)
  MemorySpace parameters = MemorySpace::device;        // 16-bit parameters and gradients
  MemorySpace optimizer_states = MemorySpace::device;  // fp32 master weights and optimizer states
};

// One entry per chunk of `gemini`, in execution order; `dp` ranks share each sharded chunk.
std::vector<ChunkPlacement> gemini_chunk_placement(const GeminiSummary& gemini, int64_t dp);

}  // namespace tessera::planner
