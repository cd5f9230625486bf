#include "tessera/planner/gradient_accumulation.h"

#include "tessera/planner/deepspeed_pipeline.h"

namespace tessera::planner {

GradientAccumulation gradient_accumulation(const PluginOptions& p, const TrainingOptions& t) {
  if (p.deepspeed_pipeline()) {
    if (t.precision == Precision::fp16) return {kDeepSpeedFp16GradAddBytes, false, true};
    return {kDeepSpeedHpGradAccumulationBytes, false, false};
  }
  if (p.runtime == Runtime::megatron) {
    const auto buffer = static_cast<double>(megatron_main_grad_bytes(p, t.precision));
    const auto gradient = static_cast<double>(compute_bytes(t.precision));
    return {2 * buffer + gradient, !p.no_gradient_accumulation_fusion, false};
  }
  return {};
}

double gradient_accumulation_bytes(const GradientAccumulation& a, int64_t params, int64_t non_matmul_params, int64_t micro_batches) {
  const auto n = static_cast<double>(micro_batches);
  const double adding = a.first_micro_batch_free ? (n > 0 ? (n - 1) / n : 0.0) : 1.0;
  return a.bytes_per_param * static_cast<double>(a.matmul_weights_fused ? non_matmul_params : params) * adding;
}

}  // namespace tessera::planner
