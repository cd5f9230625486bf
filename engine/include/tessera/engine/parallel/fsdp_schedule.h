// FSDP's unit schedule (torch_fsdp, parallel/fsdp.h): which unit
// (planner::fsdp_layout: the root, each block) is gathered, bound, given its
// unsharded gradient, reduced and released around each layer's forward and
// backward, as host logic that the CPU engine (parallel/fsdp.h) and the GPU
// step (src/cuda/fsdp_shards.h, device/fsdp_device_units.h) both run, so
// that both gather and reduce the same units at the same layers.
//
// The layers are the model's hooks: planner::kEmbeddingLayer and num_layers
// (the head) are the root's, every block is a unit. The order is PyTorch
// FSDP's (torch/distributed/fsdp/_runtime_utils.py at v2.3.0:
// _pre_forward_unshard and _pre_backward_hook unshard the unit, then
// _prefetch_handle issues the next unit's all-gather before the unit
// computes, forward_prefetch and BackwardPrefetch.BACKWARD_PRE;
// _post_backward_hook reduce-scatters the gradient and reshards):
//  - full_shard: before block l's forward block l + 1 is gathered too, and
//    block l released after it; before block l's backward block l - 1 is
//    gathered too. The root is gathered at the embeddings' forward and
//    stays so until the embeddings' backward (the root is not resharded
//    after forward, FSDP's _root_pre_forward). At most the root and two
//    blocks are gathered at a time.
//  - shard_grad_op: every unit stays gathered from its forward to its backward.
// A unit's unsharded gradient is opened before its backward (the root's at
// the head's, the first) and reduced, then the unit released, after it (the
// root's after the embeddings', the last): the root's and one block's at a time.
#pragma once

#include <vector>

#include "tessera/planner/training_config.h"

namespace tessera::engine {

enum class FsdpMoveKind {
  gather,         // the unit's shards all-gathered into a buffer of its own
  bind,           // the unit's parameters (and its gradient, when open) point into those buffers
  open_gradient,  // the unit's unsharded gradient buffer, zeroed
  reduce,         // the unit's gradient reduce-scattered into the rank's gradient shard; its buffer goes
  release,        // the gathered buffer goes and the parameters are unbound
};

struct FsdpMove {
  FsdpMoveKind kind;
  int unit;  // planner::kRootUnit or a block index
};

class FsdpSchedule {
 public:
  FsdpSchedule(planner::FsdpStrategy strategy, int blocks);

  // The moves around `layer`'s forward and backward (kEmbeddingLayer, a block, or `blocks` for the head), in order.
  std::vector<FsdpMove> before_forward(int layer);
  std::vector<FsdpMove> after_forward(int layer);
  std::vector<FsdpMove> before_backward(int layer);
  std::vector<FsdpMove> after_backward(int layer);

  bool gathered(int unit) const { return gathered_[index(unit)]; }
  bool gradient_open(int unit) const { return gradient_open_[index(unit)]; }
  int blocks() const { return blocks_; }

 private:
  static size_t index(int unit) { return static_cast<size_t>(unit + 1); }
  // The embeddings and the head belong to the root unit.
  int unit_of(int layer) const;
  void gather(int unit, std::vector<FsdpMove>& moves);
  void release(int unit, std::vector<FsdpMove>& moves);

  planner::FsdpStrategy strategy_;
  int blocks_ = 0;
  std::vector<bool> gathered_, gradient_open_;  // per unit (index unit + 1)
};

}  // namespace tessera::engine
