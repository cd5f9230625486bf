#include "tessera/planner/gradient_accumulation.h"

#include "tessera/planner/deepspeed_pipeline.h"

namespace tessera::planner {

GradientAccumulation gradient_accumulation(const PluginOptions& p, const TrainingOptions& t) {
  if (p.deepspeed_pipeline()) return {kDeepSpeedHpGradAccumulationBytes, false};
  if (p.runtime == Runtime::megatron) {
    const auto buffer = static_cast<double>(megatron_main_grad_bytes(t.precision));
    const auto gradient = static_cast<double>(compute_bytes(t.precision));
    return {2 * buffer + gradient, !p.no_gradient_accumulation_fusion};
  }
  return {};
}

double gradient_accumulation_bytes(const GradientAccumulation& a, int64_t params, int64_t non_matmul_params) {
  return a.bytes_per_param * static_cast<double>(a.matmul_weights_fused ? non_matmul_params : params);
}

}  // namespace tessera::planner
