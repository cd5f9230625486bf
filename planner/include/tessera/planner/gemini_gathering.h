// Which Gemini chunks are gathered while the layers run: one rule that the
// engine follows and the planner replays to count the peak and the traffic.
//
// Source: hpcaitech/ColossalAI v0.5.0 (d322ff8c), colossalai/zero/gemini/.
//  - gemini_mgr.py adjust_layout, before each op: the chunks gathered earlier
//    that the op does not use ("movable", chunk/manager.py
//    get_cuda_movable_chunks, sorted by count_id, i.e. packing order) go to the
//    placement policy's evict_tensors.
//  - placement_policy.py StaticPlacementPolicy.evict_tensors releases them
//    from the front while the memory of those still gathered is above
//    keep_gathered_chunk_mem = (1 - shard_param_frac) × total_chunk_mem
//    (setup_grads_device; total_chunk_mem counts a chunk once per tensor in it).
//    The `cuda`, `cpu` and `auto` policies keep nothing (a shard_param_frac of 1).
//  - chunk/manager.py reduce_chunk: in backward a chunk whose gradients are
//    complete is reduce-scattered and released whatever the budget.
// Tessera works at layer granularity (a layer's chunks are gathered together,
// chunks.h chunks_by_layer), so "op" above reads "layer", and a chunk whose
// gradients are complete is one that holds gradients and that the coming
// backward layer does not use.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/tensor_inventory.h"

namespace tessera::planner {

class GeminiGathering {
 public:
  // chunks_of_layer: per layer slot (layer + 1), the chunks its tensors sit in.
  // chunk_capacity: each chunk's elements (ChunkLayout::chunk_capacity);
  // chunks_of_layer: per layer slot, its chunks. Both are the caller's and
  // must outlive this object.
  GeminiGathering(const std::vector<int64_t>& chunk_capacity, const std::vector<std::vector<int>>& chunks_of_layer, double kept_gathered_elements);

  struct Moves {
    std::vector<int> reduced;   // gradients complete: reduce-scattered, then released
    std::vector<int> released;  // released without a gradient, after the reduced ones
    std::vector<int> gathered;  // newly gathered for the layer
    std::vector<int> gradients_opened;  // chunks that start holding a gradient chunk (backward)
  };
  // Before `layer` runs forward (backward = false) or backward. The moves
  // are valid until the next call.
  const Moves& use_layer(int layer, bool backward);
  // The end of a step's backward: every gathered chunk, in gathering order.
  const Moves& release_all();

  const std::vector<int>& gathered() const { return gathered_; }  // in gathering order
  const std::vector<int>& chunks_of_layer(int layer) const { return (*chunks_of_layer_)[static_cast<size_t>(layer + 1)]; }
  bool holds_gradients(int chunk) const { return holds_gradients_[static_cast<size_t>(chunk)]; }

 private:
  void release(int chunk);
  void clear_moves();
  const std::vector<int64_t>* chunk_capacity_;
  const std::vector<std::vector<int>>* chunks_of_layer_;
  double kept_gathered_elements_;
  std::vector<int> gathered_;
  std::vector<bool> holds_gradients_;
  Moves moves_;                         // the last call's
  std::vector<int> before_, movable_;   // scratch, kept to spare allocations
};

// What one rank's chunks cost over a step of `micro_batches` forward and
// backward passes (the hooks in the engine's order: forward from the
// embedding to the head, backward back, the chunks still gathered between
// micro-batches, all released at the step's end), replayed through GeminiGathering.
struct GeminiStepReplay {
  int64_t peak_buffer_bytes = 0;    // the chunk buffers at their largest (what gathering adds to the shards)
  int64_t gathered_elements = 0;    // all-gathered over the step (whole chunks)
  int64_t reduced_elements = 0;     // reduce-scattered over the step (whole chunks)
  int64_t forward_gathered_elements = 0;   // in a steady micro-batch's forward (the last one)
  int64_t backward_gathered_elements = 0;  // and in its backward
  // Over PCIe in the step, per rank: the shards of host chunks up into their
  // gathered chunks and gradient chunks, and their reduced slots down (the
  // memory model adds the chunks that exchange through the host, once a step each way).
  int64_t host_up_bytes = 0, host_down_bytes = 0;
};

struct GeminiChunkSet {
  std::vector<int64_t> chunk_capacity;             // ChunkLayout::chunk_capacity
  std::vector<std::vector<int>> chunks_of_layer;   // chunks_by_layer
  double kept_gathered_elements = 0;               // kept_gathered_elements (gemini_static_placement.h)
  std::vector<bool> parameter_on_host;             // parameter_chunks_on_host: a gathered chunk is then a whole
                                                   // new buffer; on the device the shard grows into it
};

GeminiStepReplay replay_gemini_step(const GeminiChunkSet& chunks, int64_t dp, int64_t parameter_bytes, int64_t gradient_bytes,
                                    int64_t micro_batches);

// Per chunk, whether it is still gathered when forward ends and backward
// begins: the chunks shard_param_frac's budget keeps, and the head's.
std::vector<bool> gathered_after_forward(const GeminiChunkSet& chunks);

}  // namespace tessera::planner
