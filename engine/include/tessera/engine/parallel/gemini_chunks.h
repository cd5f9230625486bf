// Gemini's chunks as both engines run them (the CPU engine's parallel/
// gemini.h, the GPU step's src/cuda/gemini_shards.h): which flat parameters
// each chunk holds and where, each rank's slot of it, where its 16-bit shards
// and its fp32 states live under the plan's placement, and how the gathering's
// decisions (planner::GeminiGathering) are carried out, move by move. One
// place, so that the two engines gather, release and reduce the same chunks
// at the same layers as the planner replays them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/planner/chunks.h"
#include "tessera/planner/gemini_gathering.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

struct GeminiChunk {
  std::vector<int> parameters;   // flat-order indices packed here, in packing order
  std::vector<int64_t> offsets;  // of each, in the chunk
  int64_t shard = 0;             // elements of the chunk per rank (its capacity / ranks)
  int64_t shard_offset = 0;      // where its slot starts in the rank's optimizer states
  bool on_host = false;          // its 16-bit parameter and gradient shards live on the host
  bool optimizer_on_host = false;  // its slot's fp32 master weights and optimizer states live on the host
  // Its 16-bit shards on the device and its states on the host: the reduced
  // gradient shard goes down to a host copy each step, and the updated
  // weights come back up through it (planner::exchanges_through_host).
  bool exchanges_through_host() const { return planner::exchanges_through_host(optimizer_on_host, on_host); }
};

struct GeminiChunkPlan {
  planner::ChunkLayout layout;                     // planner::pack_chunks at the plan's chunk size
  std::vector<std::vector<int>> chunks_of_layer;   // per layer slot (planner::chunks_by_layer)
  double kept_gathered_elements = 0;               // shard_param_frac's budget (gemini_static_placement.h)
  int64_t optimizer_chunks_on_host = 0;            // the leading chunks whose fp32 states live on the host
  std::vector<GeminiChunk> chunks;
  // Elements of the rank's optimizer states on the host: the slots of the
  // leading optimizer_chunks_on_host chunks, which come first in the shard.
  int64_t host_optimizer_elements() const;
  int64_t shard_numel() const;  // all the rank's slots
  // The chunk whose slot holds a place in the rank's optimizer states.
  size_t chunk_holding(int64_t offset_in_shard) const;
};

// host_chunks: the leading chunks whose 16-bit shards live on the host, where
// the plan solved it (`auto`); unset: planner::parameter_chunks_on_host.
GeminiChunkPlan gemini_chunk_plan(const planner::Model& model, const planner::GeminiOptions& gemini, int64_t dp,
                                  std::optional<int64_t> host_chunks = std::nullopt);

// What a move does to one chunk, on some memory (host arrays or device buffers).
class GeminiChunkMoves {
 public:
  virtual ~GeminiChunkMoves() = default;
  virtual void gather(int chunk) = 0;          // all-gathered whole from the ranks' shards
  virtual void open_gradients(int chunk) = 0;  // a gradient chunk beside it: this rank's slot its shard, the rest 0
  virtual void reduce(int chunk) = 0;          // the gradient chunk reduce-scattered into the shard and dropped
  virtual void release(int chunk) = 0;         // the gathered weights dropped (unchanged: nothing goes back)
  virtual void bind(int chunk) = 0;            // the chunk's parameters (and open gradients) point into it
};

// The gathering's moves in their one order: the chunks whose gradients are
// complete reduced and released, the others released, then the new ones
// gathered and their gradient chunks opened.
void apply_gemini_moves(const planner::GeminiGathering::Moves& moves, GeminiChunkMoves& chunks);
// Before `layer` runs forward or backward: the moves, then every chunk of
// the layer (new or not) binds its parameters.
void use_gemini_layer(planner::GeminiGathering& gathering, int layer, bool backward, GeminiChunkMoves& chunks);

}  // namespace tessera::engine
