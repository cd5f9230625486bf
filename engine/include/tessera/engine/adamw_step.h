// The scalars one AdamW step shares across all elements, computed once on
// the host, in fp32 as the update runs, by every backend (optimizer.h on the
// CPU, kernels/adamw.h on the GPU): bias corrections 1 − β^t for step t
// (Kingma & Ba 2015, Algorithm 1), and the factor every gradient is multiplied
// by (clipping and the loss scale's inverse). The clipping coefficient is
// computed here too, from the global gradient norm, so that every optimizer
// (one rank, a ZeRO shard, on either backend) clips by the same bits.
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera::engine {

struct AdamWScalars {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  float bias1 = 0, bias2 = 0;      // 1 − beta1^t, 1 − beta2^t
  float gradient_factor = 1;       // clip / loss scale
};

// Gradient clipping to `max_norm` (Pascanu et al. 2013; torch.nn.utils.
// clip_grad_norm_): max_norm / norm where the norm exceeds it, else 1; 0: no clipping.
inline double clip_coefficient(double norm, double max_norm) { return max_norm > 0 && norm > max_norm ? max_norm / norm : 1.0; }

inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, int64_t step, double gradient_factor) {
  const auto t = static_cast<double>(step);
  return {static_cast<float>(lr),
          static_cast<float>(beta1),
          static_cast<float>(beta2),
          static_cast<float>(eps),
          static_cast<float>(1 - std::pow(beta1, t)),
          static_cast<float>(1 - std::pow(beta2, t)),
          static_cast<float>(gradient_factor)};
}

}  // namespace tessera::engine
