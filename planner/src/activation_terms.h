// Building blocks of the activation tables (activations.cpp, activations_hf.cpp,
// activations_torchtitan.cpp): a plain term, a flash kernel's log-sum-exp and
// the marks torchtitan's op-level checkpointing policy puts on a block.
#pragma once

#include <string_view>
#include <vector>

#include "tessera/planner/activations.h"

namespace tessera::planner {

inline constexpr int64_t kFp32 = 4;  // bytes

// A term kept for backward under no recompute and under selective recompute.
inline ActivationTerm term(std::string_view name, int64_t elements, int64_t bytes, ActivationSplit split) {
  return ActivationTerm{name, elements, bytes, false, split, true, false};
}

// A flash-attention kernel's fp32 log-sum-exp, one per query row and head (the
// heads split over tp ranks). Selective recompute re-runs the kernel, so it goes.
ActivationTerm log_sum_exp(std::string_view name, const ModelConfig& c);

// What torchtitan's op-level policy keeps of a block (op_checkpoint_policy.h):
// the block's input, SDPA's output and log-sum-exp, and the outputs of the
// linears it saves. A saved linear whose output no term of the block is (w2's)
// becomes a term of its own in the activations' dtype (`dt` bytes) that no
// other mode keeps.
void mark_op_policy(std::vector<ActivationTerm>& block, const ModelConfig& c, int64_t dt);

}  // namespace tessera::planner
