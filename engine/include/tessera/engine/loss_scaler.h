// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018, §3.2; the
// policy of torch.cuda.amp.GradScaler and Megatron-LM's DynamicGradScaler):
// the loss is multiplied by `scale` before backward; if any gradient is inf or
// NaN the step is skipped and, after `hysteresis` such steps, the scale backs
// off; after `growth_interval` good steps in a row it grows.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/engine/host_device.h"

namespace tessera::engine {

struct LossScalerOptions {
  double initial_scale = 65536.0;  // 2^16, GradScaler's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  // Overflowing steps before the scale backs off: 1 backs off at once, as
  // GradScaler does; Megatron-LM's default is 2.
  int64_t hysteresis = 1;
  double min_scale = 1.0;
};

// True when x is inf or NaN: the check every backend runs over the gradients.
template <typename T>
TESSERA_HOST_DEVICE bool non_finite(T x) {
  return !(std::isfinite(x));
}

// What a checkpoint keeps to resume the scaler exactly.
struct LossScalerState {
  double scale = 0;  // 0: no scaler state (fp32, bf16)
  int64_t good_steps = 0;
  int64_t hysteresis_left = 0;
  int64_t skipped = 0;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerOptions options = {}) : options_(options), scale_(options.initial_scale), hysteresis_left_(options.hysteresis) {}

  double scale() const { return scale_; }

  // After backward: `found_non_finite` says whether any gradient overflowed.
  // Returns whether the optimizer may step (false: skip this step).
  bool update(bool found_non_finite) {
    if (found_non_finite) {
      good_steps_ = 0;
      // Once the tolerated overflows are used up, every overflow backs off until
      // the scale grows again (Megatron-LM's DynamicGradScaler).
      hysteresis_left_ = hysteresis_left_ > 0 ? hysteresis_left_ - 1 : 0;
      if (hysteresis_left_ == 0) scale_ = std::fmax(options_.min_scale, scale_ * options_.backoff_factor);
      ++skipped_;
      return false;
    }
    if (++good_steps_ >= options_.growth_interval) {
      scale_ *= options_.growth_factor;
      good_steps_ = 0;
      hysteresis_left_ = options_.hysteresis;
    }
    return true;
  }

  int64_t skipped_steps() const { return skipped_; }

  LossScalerState state() const { return {scale_, good_steps_, hysteresis_left_, skipped_}; }
  void restore(const LossScalerState& s) {
    scale_ = s.scale;
    good_steps_ = s.good_steps;
    hysteresis_left_ = s.hysteresis_left;
    skipped_ = s.skipped;
  }

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t hysteresis_left_;
  int64_t skipped_ = 0;
};

}  // namespace tessera::engine
