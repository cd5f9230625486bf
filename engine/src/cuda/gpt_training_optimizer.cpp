// The optimizer step of one GPU's training step (gpt_training_state.h): the
// global gradient norm (summed over the pipeline's stages), clipping and
// AdamW on the flat buffers, or the ZeRO, Gemini or FSDP shards' own step.
#include "gpt_training_state.h"

#include <optional>

#include "device_adamw_step.h"
#include "tessera/engine/cuda/adamw.h"

namespace tessera::engine::cuda {

// The square of the global gradient norm from this stage's: summed over the
// stages (a tied embedding's copy is not counted, planner::counted_in_gradient_norm).
double GptTraining::State::over_stages(double sum_of_squares) {
  if (pipeline == nullptr) return sum_of_squares;
  double* sum = norm_sum.as<double>();
  check(cudaMemcpy(sum, &sum_of_squares, sizeof(double), cudaMemcpyHostToDevice), "copying the sum of squares");
  check(pipeline->all_reduce(sum, sum, 1, comm::ReduceOp::sum));
  check(cudaMemcpy(&sum_of_squares, sum, sizeof(double), cudaMemcpyDeviceToHost), "copying the sum of squares");
  return sum_of_squares;
}

// The CPU optimizer's step (Optimizer::apply): the global norm, clipping to
// max_grad_norm, one AdamW update per parameter with its decay, rounding into
// bf16; under ZeRO the shard's (zero_shards.h).
std::optional<double> GptTraining::State::optimizer_step() {
  if (zero || gemini || fsdp) {
    auto norm = zero     ? zero->step(sum_workspace.as<void>(), norm_sum.as<double>())
                : gemini ? gemini->step(sum_workspace.as<void>(), norm_sum.as<double>())
                         : fsdp->step(sum_workspace.as<void>(), norm_sum.as<double>());
    if (!norm) throw StepError(norm.error().message);
    return norm.value();
  }
  const double sum = over_stages(tp.sum_of_squares(grads.as<T>(), norm_sum.as<double>(), sum_workspace.as<void>()));
  const std::optional<DeviceAdamWStep> begun = begin_adamw_step(sum, steps, options);
  if (!begun) return std::nullopt;
  const AdamWScalars& scalars = begun->scalars;
  for (size_t p = 0; p < order.size(); ++p) {
    const int64_t offset = order[p].offset;
    const float wd = decay[p] ? static_cast<float>(options.weight_decay) : 0.0f;
    check(adamw(params.as<T>() + offset, master.as<float>() + offset, m.as<float>() + offset, v.as<float>() + offset, grads.as<T>() + offset,
                order[p].numel, wd, scalars, nullptr),
          "adamw");
  }
  return begun->norm;
}

}  // namespace tessera::engine::cuda
