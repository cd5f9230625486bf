// What the GPU step (cuda/gpt_training.h) holds and computes as one of tp
// tensor-parallel ranks, as host code so that the CPU tests check it against
// the CPU model's rank of the same group (tests/engine/tensor_parallel_part_test.cpp):
// its widths, the ranges of its flat gradients (or of its ZeRO shard) that the global norm counts,
// and its initial parameters.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/engine/half.h"
#include "tessera/planner/model.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/pipeline_stage_model.h"

namespace tessera::engine {

// The widths one of `tp` ranks computes with: the whole config's but for
// num_heads, num_kv_heads and intermediate_size over tp, and vocab_size the
// rank's ⌈V/tp⌉ vocabulary rows (planner::tp_local_shape's split).
planner::ModelConfig tp_rank_widths(const planner::ModelConfig& whole, int64_t tp);

// [begin, end) runs of `part`'s flat order (planner/sharding.h) holding the
// parameters rank `tp_rank` counts in the gradient norm
// (planner::counted_in_gradient_norm), adjacent ones merged: on one rank, the
// whole buffer.
std::vector<std::pair<int64_t, int64_t>> gradient_norm_runs(const planner::Model& part, int64_t tp_rank);

// The same for a ZeRO shard of `part` (hybrid_parallel, planner::
// optimizer_layout's pieces over the data-parallel ranks): [begin, end) runs
// of the shard holding the pieces whose parameters rank `tp_rank` counts,
// adjacent ones merged, as ParallelStrategy::global_sum_of_squares sums them.
std::vector<std::pair<int64_t, int64_t>> gradient_norm_runs(const planner::Model& part, int64_t tp_rank, const std::vector<planner::ShardPiece>& shard);

// The bf16 parameters of rank `rank`'s part of `whole` (of pipeline stage
// `stage`'s tensors) in its flat order, from the planner's initialization
// (model/initialization.h), as the CPU model's rank of the same group and
// stage starts from, then zeros up to `numel` (ZeRO's padding; at least the
// part's parameter count).
std::vector<bf16> initial_part_parameters(const planner::Model& whole, uint64_t seed, int64_t tp, int64_t rank, int64_t numel,
                                          const planner::PipelinePlacement& stage = {});

}  // namespace tessera::engine
