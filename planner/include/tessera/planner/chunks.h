// Gemini-style chunks (ColossalAI's chunk-based ZeRO-3, Fang et al. 2022,
// "Parallel Training of Pre-trained Models via Chunk-based Dynamic Memory
// Management"): parameters packed in model.parameters() order (module_order.h)
// into chunks; a tensor never splits; a chunk is sharded evenly over the
// data-parallel ranks and gathered whole just before use.
//
// Source: hpcaitech/ColossalAI v0.5.0 (d322ff8c), colossalai/zero/gemini/chunk/
// search_utils.py (search_chunk_configuration) and manager.py (register_tensor).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/tensor_inventory.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct ChunkLayout {
  int64_t chunk_size = 0;                 // elements per chunk, as configured
  std::vector<int64_t> chunk_used;        // elements used in each chunk
  // Elements of each chunk: chunk_size, or, for a tensor larger than that, a
  // chunk of its own: its numel rounded up to a multiple of dp (register_tensor).
  std::vector<int64_t> chunk_capacity;
  std::vector<int> tensor_chunk;          // per inventory tensor: its chunk (-1 for a tied alias)
  std::vector<int> packing_order;         // the unique tensors (inventory indices), in the order packed
  int64_t num_chunks() const { return static_cast<int64_t>(chunk_used.size()); }
  int64_t padded_elements() const;        // sum of the capacities
  int64_t waste_elements() const;         // padding: unused tail of every chunk
};

// The unique tensors in the order Gemini registers them: inventory.module_order,
// or, for a hand-made inventory without one, execution order.
std::vector<int> packing_order(const TensorInventory& inventory);

// ColossalAI's ChunkManager.register_tensor, tensor after tensor: appended to the
// last chunk when it fits, else a new chunk of chunk_size elements, or of the
// tensor's numel rounded up to dp when the tensor is larger than chunk_size.
ChunkLayout pack_chunks(const TensorInventory& inventory, int64_t chunk_size, int64_t dp);

// The sizes ColossalAI's search weighs, in packing order: every unique tensor's
// numel except those above mean + 3 standard deviations (population) of them
// all (_filter_exlarge_params, filter_exlarge_params=True, the default that
// GeminiPlugin never changes). The dropped tensors get chunks of their own
// when larger than the chosen size (pack_chunks).
std::vector<int64_t> chunk_search_sizes(const TensorInventory& inventory);

// Padding of a greedy packing of `sizes` into chunks of chunk_size
// (ColossalAI's _get_unused_byte, which counts elements, not bytes).
int64_t unused_elements(const std::vector<int64_t>& sizes, int64_t chunk_size);

// The chunk size ColossalAI's search_chunk_configuration picks: candidates from
// max(largest searched size, min_chunk_size_m Mi) rounded up to the interval,
// over search_range_m Mi at search_interval steps, the first with the least
// padding of chunk_search_sizes, then rounded up to a multiple of the
// data-parallel size so that shards are even.
// Not modelled: a model under min_chunk_size_m Mi elements in all, which
// ColossalAI keeps in one chunk gathered on every rank (keep_gathered=True);
// Tessera shards that one chunk like any other.
int64_t search_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp);
// The chunk size a Gemini run uses: the plan's (options.chunk_size), else the search's.
int64_t gemini_chunk_size(const TensorInventory& inventory, const GeminiOptions& options, int64_t dp);

// Most chunks one layer touches at once (a chunk spanning two layers is held by
// both): Gemini gathers a chunk before its first tensor runs and releases it
// after its last, so this is the peak number gathered in forward and backward
// when none is kept gathered (gemini_gathering.h).
int64_t peak_chunks_per_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers);
// Per layer slot (layer + 1: kEmbeddingLayer .. num_layers, the head), the
// chunks its tensors sit in, ascending.
std::vector<std::vector<int>> chunks_by_layer(const ChunkLayout& layout, const TensorInventory& inventory, int num_layers);

}  // namespace tessera::planner
