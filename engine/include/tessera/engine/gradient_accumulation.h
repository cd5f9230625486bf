// Gradient accumulation over a step's micro-batches: the rule the CPU trainer
// (trainer.cpp) and the GPU step (cuda/gpt_training.h, cuda/gpu_train.cpp)
// share. k micro-batches of b sequences on each of n data-parallel ranks are
// one batch of n·k·b: every micro-batch's backward adds its gradient into the
// same flat buffer, and only the last one's reduces over the ranks (PyTorch
// DDP's no_sync on the others; Li et al. 2020, "PyTorch Distributed", §3.2.4).
#pragma once

#include <cstdint>

namespace tessera::engine {

// What each micro-batch's backward multiplies the gradient of its mean loss
// by: 1/k (the step's mean over its k micro-batches), 1/n (the ranks'
// gradients are summed, their mean is wanted) and the loss scale (fp16's; 1
// otherwise). Written in the order the CPU trainer always computed it, so its
// bits are unchanged.
constexpr double micro_batch_gradient_scale(double loss_scale, int64_t micro_batches, int64_t ranks) {
  return loss_scale / static_cast<double>(micro_batches) * (1.0 / static_cast<double>(ranks));
}

// Whether micro-batch `micro` (from 0) of the step's `micro_batches` is the
// one whose backward reduces the accumulated gradients over the ranks.
constexpr bool reduces_in_backward(int64_t micro, int64_t micro_batches) { return micro == micro_batches - 1; }

// The step's loss as the trainers report it: the running mean over the
// micro-batches, each micro-batch's mean loss added divided by k.
constexpr double add_micro_batch_loss(double step_loss, double micro_batch_loss, int64_t micro_batches) {
  return step_loss + micro_batch_loss / static_cast<double>(micro_batches);
}

}  // namespace tessera::engine
