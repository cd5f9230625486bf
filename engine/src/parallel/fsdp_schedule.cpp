#include "tessera/engine/parallel/fsdp_schedule.h"

#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_inventory.h"

namespace tessera::engine {

using planner::FsdpStrategy;
using planner::kRootUnit;

FsdpSchedule::FsdpSchedule(FsdpStrategy strategy, int blocks)
    : strategy_(strategy), blocks_(blocks), gathered_(static_cast<size_t>(blocks + 1), false), gradient_open_(static_cast<size_t>(blocks + 1), false) {}

int FsdpSchedule::unit_of(int layer) const { return layer == planner::kEmbeddingLayer || layer >= blocks_ ? kRootUnit : layer; }

void FsdpSchedule::gather(int unit, std::vector<FsdpMove>& moves) {
  if (gathered_[index(unit)]) return;
  gathered_[index(unit)] = true;
  moves.push_back({FsdpMoveKind::gather, unit});
}

void FsdpSchedule::release(int unit, std::vector<FsdpMove>& moves) {
  gathered_[index(unit)] = false;
  moves.push_back({FsdpMoveKind::release, unit});
}

std::vector<FsdpMove> FsdpSchedule::before_forward(int layer) {
  std::vector<FsdpMove> moves;
  const int unit = unit_of(layer);
  gather(unit, moves);
  if (unit != kRootUnit && strategy_ == FsdpStrategy::full_shard && unit + 1 < blocks_) gather(unit + 1, moves);  // forward prefetch
  moves.push_back({FsdpMoveKind::bind, unit});
  return moves;
}

std::vector<FsdpMove> FsdpSchedule::after_forward(int layer) {
  std::vector<FsdpMove> moves;
  const int unit = unit_of(layer);
  if (unit != kRootUnit && strategy_ == FsdpStrategy::full_shard) release(unit, moves);
  return moves;
}

std::vector<FsdpMove> FsdpSchedule::before_backward(int layer) {
  std::vector<FsdpMove> moves;
  if (layer == planner::kEmbeddingLayer) return moves;  // the root's gradient is open since the head's backward
  const int unit = unit_of(layer);
  gather(unit, moves);
  if (unit > 0 && strategy_ == FsdpStrategy::full_shard) gather(unit - 1, moves);  // BACKWARD_PRE
  gradient_open_[index(unit)] = true;
  moves.push_back({FsdpMoveKind::open_gradient, unit});
  moves.push_back({FsdpMoveKind::bind, unit});
  return moves;
}

std::vector<FsdpMove> FsdpSchedule::after_backward(int layer) {
  std::vector<FsdpMove> moves;
  if (layer == blocks_) return moves;  // the head: the root's gradient waits for the embeddings'
  const int unit = unit_of(layer);
  gradient_open_[index(unit)] = false;
  moves.push_back({FsdpMoveKind::reduce, unit});
  release(unit, moves);
  return moves;
}

}  // namespace tessera::engine
