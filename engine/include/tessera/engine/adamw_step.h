// The scalars one AdamW step shares across all elements, computed once on
// the host, in fp32 as the update runs, by every backend (optimizer.h on the
// CPU, kernels/adamw.h on the GPU): bias corrections 1 − β^t for step t
// (Kingma & Ba 2015, Algorithm 1), and the factor every gradient is multiplied
// by (clipping and the loss scale's inverse).
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera::engine {

struct AdamWScalars {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  float bias1 = 0, bias2 = 0;      // 1 − beta1^t, 1 − beta2^t
  float gradient_factor = 1;       // clip / loss scale
};

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
