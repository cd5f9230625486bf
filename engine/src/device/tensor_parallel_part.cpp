#include "tessera/engine/device/tensor_parallel_part.h"

#include <algorithm>

#include "tessera/engine/model/initialization.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {

planner::ModelConfig tp_rank_widths(const planner::ModelConfig& whole, int64_t tp) {
  planner::ModelConfig local = whole;
  local.num_heads /= tp;
  local.num_kv_heads /= tp;
  local.intermediate_size /= tp;
  local.vocab_size = (whole.vocab_size + tp - 1) / tp;
  return local;
}

std::vector<std::pair<int64_t, int64_t>> gradient_norm_runs(const planner::Model& part, int64_t tp_rank, const std::vector<planner::ShardPiece>& shard) {
  const std::vector<bool> counted = planner::counted_in_gradient_norm(part, tp_rank);
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (const planner::ShardPiece& piece : shard) {
    if (!counted[static_cast<size_t>(piece.parameter)]) continue;
    const int64_t begin = piece.offset_in_shard, end = begin + piece.numel;
    if (!runs.empty() && runs.back().second == begin) {
      runs.back().second = end;
    } else {
      runs.emplace_back(begin, end);
    }
  }
  return runs;
}

// The whole flat order is the one shard of one rank.
std::vector<std::pair<int64_t, int64_t>> gradient_norm_runs(const planner::Model& part, int64_t tp_rank) {
  return gradient_norm_runs(part, tp_rank, planner::shard_pieces(planner::flat_parameter_order(part.inventory), 1, 0));
}

std::vector<bf16> initial_part_parameters(const planner::Model& whole, uint64_t seed, int64_t tp, int64_t rank, int64_t numel,
                                          const planner::PipelinePlacement& stage) {
  const int64_t part = planner::tp_rank_inventory(planner::stage_inventory(whole.inventory, whole.config.num_layers, stage), tp).parameter_count();
  std::vector<bf16> values(static_cast<size_t>(std::max(numel, part)));  // the padding stays 0
  for_each_initial_value_of_part(whole, seed, tp, rank, stage,
                                 [&values](int64_t i, double value) { values[static_cast<size_t>(i)] = narrow<bf16>(static_cast<float>(value)); });
  return values;
}

}  // namespace tessera::engine
