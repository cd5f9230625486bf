// The buffers the engine's transformer gives its activations under a
// recompute mode, read from the planner's activation table (the `tessera`
// profile on the CPU, `tessera_gpu` in the GPU step) by the planner's rule
// (planner::term_kept): one source for the CPU model (model/transformer.h),
// the GPU step (cuda/gpt_training.h) and the planner's estimate
// (planner::block_activation_bytes), so that the three agree term by term
// and byte by byte.
//
// A block keeps the terms the mode keeps, from its forward to its backward,
// in buffers of its own; under --recompute-num-layers the blocks after the
// first few of each chunk keep every term, as without recompute
// (planner/recompute_blocks.h). The terms it does not keep live in one working set
// shared by every block: each block's forward writes them there, the next
// block's forward overwrites them, and before a block's backward the rerun
// (BlockRerun) writes them again from what the block kept. The planner counts
// the same: `stash` per block, `working` once.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/planner/activations.h"
#include "tessera/planner/memory_categories.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// What runs again before a block's backward to rebuild what the block did not keep.
enum class BlockRerun {
  nothing,    // recompute none: every term is kept
  attention,  // selective: the attention core from the kept q, k and v (Korthikanti et al. 2022 §5),
              // writing its output and log-sum-exp again
  block,      // full: the whole block's forward from its kept input
};

BlockRerun block_rerun(planner::RecomputeMode mode);

struct ActivationBuffer {
  std::string_view name;  // the table's term
  int64_t bytes = 0;
  int64_t bytes_per_element = 0;
  MemoryCategory category = MemoryCategory::activations;
  int64_t elements() const { return bytes / bytes_per_element; }
};

struct ActivationBuffers {
  std::vector<ActivationBuffer> kept;         // each block's own, forward to backward
  std::vector<ActivationBuffer> kept_whole;   // under --recompute-num-layers, each block's not recomputed: every term
  std::vector<ActivationBuffer> working;      // the terms the mode recomputes: one set for every block
  std::vector<ActivationBuffer> first_stage;  // with the embedding (the GPU step's tokens)
  std::vector<ActivationBuffer> last_stage;   // the final norm's and the head's inputs (and the GPU step's targets)
  std::vector<ActivationBuffer> logits;       // the logits and the per-token losses (category `logits`)
  std::vector<ActivationBuffer> scratch;      // backward's activation gradients, once
  BlockRerun rerun = BlockRerun::nothing;
  planner::BlockRecompute recompute;
  // What the block at `index_in_chunk` keeps, and what runs again before its backward.
  const std::vector<ActivationBuffer>& kept_by(int64_t index_in_chunk) const;
  BlockRerun rerun_of(int64_t index_in_chunk) const;
  // Whether that block follows the mode (kept, rerun), not --recompute-num-layers' others (kept_whole).
  bool follows_mode(int64_t index_in_chunk) const;
  // Bytes booked under `category` with one chunk of `blocks` blocks, each buffer
  // rounded up to `align` bytes (as the caching allocator hands out blocks of up to 1 MiB).
  int64_t bytes(MemoryCategory category, int64_t blocks, int64_t align = 1) const;
};

// Every term of the table, sized for `shape`.
ActivationBuffers activation_buffers(const planner::ActivationTable& table, const planner::ActivationShape& shape, planner::BlockRecompute recompute);

}  // namespace tessera::engine
