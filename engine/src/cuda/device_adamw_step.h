// How each GPU optimizer (the one-GPU step's, ZeRO's shard, Gemini's slots,
// FSDP's shard) starts a step from the global sum of squared gradients, as the CPU
// Optimizer::apply does (optimizer.h): a sum that is not finite skips the
// update; otherwise the step is counted and the norm and the step's AdamW
// scalars (clipping to max_grad_norm, adamw_step.h) come back.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "cuda_errors.h"
#include "tessera/engine/adamw_step.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/sum_of_squares.h"
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

// The global sum of squares of a rank's `n` gradients: summed on the device
// into `device_sum` (a double and the overflow flag; `workspace`:
// sum_of_squares_workspace_bytes(n)), all-reduced there over `group` (in rank
// order; null: one GPU), then copied to the host.
template <typename G>
Result<double> global_sum_of_squares(const G* grads, int64_t n, comm::Communicator* group, void* workspace, double* device_sum) {
  if (Status s = succeeded(sum_of_squares(device_sum, reinterpret_cast<int32_t*>(device_sum + 1), grads, n, 1.0, workspace, nullptr),
                           "the gradients' sum of squares");
      !s) {
    return s.error();
  }
  if (group != nullptr) {
    if (Status s = group->all_reduce(device_sum, device_sum, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
  }
  double sum = 0;
  if (Status s = succeeded(cudaMemcpy(&sum, device_sum, sizeof sum, cudaMemcpyDeviceToHost), "copying the sum of squares"); !s) return s.error();
  return sum;
}

}  // namespace tessera::engine::cuda
