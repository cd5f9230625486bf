#include "tessera/planner/optimizer_step.h"

#include "tessera/planner/deepspeed_pipeline.h"
#include "tessera/planner/gradient_accumulation.h"

namespace tessera::planner {
namespace {

// A fused Adam's reads and writes: the gradient, the fp32 parameter, each moment.
double fused_update_bytes(double gradient_bytes, OptimizerKind optimizer) {
  return gradient_bytes + 2 * 4 + 2 * 4 * static_cast<double>(optimizer_state_count(optimizer));
}

double megatron_step_bytes(const PluginOptions& p, const TrainingOptions& t) {
  if (!is_mixed_precision(t.precision)) return 4 + fused_update_bytes(4, t.optimizer);  // the norm's read, the update
  const bool fp16 = t.precision == Precision::fp16;
  const double cast_to_fp32 = megatron_main_grad_bytes(p, t.precision) == 2 ? 2 + 4 : 0;  // a 16-bit main-gradient buffer's
  const double unscale = fp16 ? 4 + 4 : 0;
  const double norm = 4;
  const double copy_to_model = 4 + 2;
  return cast_to_fp32 + unscale + norm + fused_update_bytes(4, t.optimizer) + copy_to_model;
}

}  // namespace

double optimizer_step_bytes_per_param(const PluginOptions& p, const TrainingOptions& t) {
  if (p.runtime == Runtime::megatron) return megatron_step_bytes(p, t);
  if (p.deepspeed_pipeline()) {
    const double prepare = t.precision == Precision::fp16 ? kDeepSpeedZeroPartitionPrepBytes : 0;  // DeepSpeedZeroOptimizer's
    return prepare + fused_update_bytes(4, t.optimizer) + kDeepSpeedLowPrecisionUpdateBytes;
  }
  const double weight16 = is_mixed_precision(t.precision) ? 2 : 0;
  return fused_update_bytes(static_cast<double>(compute_bytes(t.precision)), t.optimizer) + weight16;
}

}  // namespace tessera::planner
