// How each GPU optimizer (the one-GPU step's, ZeRO's shard, Gemini's slots,
// FSDP's shard) starts a step from the global sum of squared gradients, as the CPU
// Optimizer::apply does (optimizer.h): a sum that is not finite skips the
// update; otherwise the step is counted and the norm and the step's AdamW
// scalars (clipping to max_grad_norm, adamw_step.h) come back.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "tessera/engine/adamw_step.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine::cuda {

struct DeviceAdamWStep {
  double norm = 0;
  AdamWScalars scalars;
};

inline std::optional<DeviceAdamWStep> begin_adamw_step(double sum_of_squares, int64_t& steps, const OptimizerOptions& options) {
  if (!std::isfinite(sum_of_squares)) return std::nullopt;
  const double norm = std::sqrt(sum_of_squares);
  ++steps;
  return DeviceAdamWStep{norm, adamw_scalars(options.learning_rate, options.beta1, options.beta2, options.eps, steps,
                                             clip_coefficient(norm, options.max_grad_norm))};
}

}  // namespace tessera::engine::cuda
