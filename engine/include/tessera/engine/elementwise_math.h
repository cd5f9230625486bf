// Per-element arithmetic shared by every backend (see host_device.h).
#pragma once

#include <cmath>

#include "tessera/engine/host_device.h"

namespace tessera::engine::math {

// GELU, tanh approximation (Hendrycks & Gimpel 2016, eq. 2), as GPT-2 uses it
// ("gelu_new" in transformers).
// tanh(u) = 1 − 2 / (e^(2u) + 1): one exp, which glibc computes about twice
// as fast as tanhf (GELU's tanh was 16% of a training step's profile). It
// saturates correctly (e^(2u) → inf gives 1, → 0 gives −1); near 0 its
// absolute error stays below 1e-7, and GELU only uses 1 + tanh.
template <typename T>
TESSERA_HOST_DEVICE T tanh_via_exp(T u) {
  return T(1) - T(2) / (std::exp(T(2) * u) + T(1));
}

template <typename T>
TESSERA_HOST_DEVICE T gelu(T x) {
  const T c = T(0.7978845608028654);  // sqrt(2 / pi)
  const T inner = c * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + tanh_via_exp(inner));
}

template <typename T>
TESSERA_HOST_DEVICE T gelu_grad(T x) {
  const T c = T(0.7978845608028654);
  const T inner = c * (x + T(0.044715) * x * x * x);
  const T t = tanh_via_exp(inner);
  const T sech2 = T(1) - t * t;
  return T(0.5) * (T(1) + t) + T(0.5) * x * sech2 * c * (T(1) + T(3) * T(0.044715) * x * x);
}

// SiLU (Elfwing et al. 2018), the gate of SwiGLU.
template <typename T>
TESSERA_HOST_DEVICE T silu(T x) {
  return x / (T(1) + std::exp(-x));
}

template <typename T>
TESSERA_HOST_DEVICE T silu_grad(T x) {
  const T s = T(1) / (T(1) + std::exp(-x));
  return s * (T(1) + x * (T(1) - s));
}

// One AdamW step for one parameter (Loshchilov & Hutter 2019, Algorithm 2):
// decoupled weight decay, bias-corrected moments. `bias1` = 1 - beta1^t,
// `bias2` = 1 - beta2^t for step t.
template <typename T>
TESSERA_HOST_DEVICE void adamw_update(T& param, T& m, T& v, T grad, T lr, T beta1, T beta2, T eps, T weight_decay, T bias1,
                                      T bias2) {
  m = beta1 * m + (T(1) - beta1) * grad;
  v = beta2 * v + (T(1) - beta2) * grad * grad;
  const T m_hat = m / bias1;
  const T v_hat = v / bias2;
  param -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * param);
}

}  // namespace tessera::engine::math
