// Gemini-style chunks (ColossalAI's chunk-based ZeRO-3, Fang et al. 2022,
// "Parallel Training of Pre-trained Models via Chunk-based Dynamic Memory
// Management"): parameters packed in execution order into equal-size chunks;
// a tensor never splits; a chunk is sharded evenly over the data-parallel ranks
// and gathered whole just before use.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/tensor_inventory.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct ChunkLayout {
  int64_t chunk_size = 0;                 // elements per chunk
  std::vector<int64_t> chunk_used;        // elements used in each chunk
  std::vector<int> tensor_chunk;          // per inventory tensor: its chunk (-1 for a tied alias)
  int64_t num_chunks() const { return static_cast<int64_t>(chunk_used.size()); }
  int64_t waste_elements() const;         // padding: unused tail of every chunk
};

// Packs greedily in execution order; needs chunk_size >= the largest tensor.
ChunkLayout pack_chunks(const TensorInventory& inventory, int64_t chunk_size);

// Padding of a greedy packing, without building the layout.
int64_t chunk_waste_elements(const TensorInventory& inventory, int64_t chunk_size);

// The chunk size ColossalAI's search_chunk_configuration would pick: candidates
// from max(largest tensor, min_chunk_size_m Mi) rounded up to the interval, over
// search_range_m Mi at search_interval steps, least waste first, then rounded up
// to a multiple of the data-parallel size so that shards are even.
int64_t search_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp);
// The chunk size a Gemini run uses: the plan's (options.chunk_size), else the search's.
int64_t gemini_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp);

// Most chunks one layer touches at once (a chunk spanning two layers is held by
// both): Gemini gathers a chunk before its first tensor runs and releases it
// after its last, so this is the peak number gathered in forward and backward.
int64_t peak_chunks_per_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers);

}  // namespace tessera::planner
