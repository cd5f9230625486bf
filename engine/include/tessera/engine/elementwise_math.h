// Per-element arithmetic shared by every backend (see host_device.h).
#pragma once

#include <cmath>
#include <cstdint>

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

// The residual stream's sum (He et al. 2016, eq. 1: y = F(x) + x), in the compute type.
template <typename W>
TESSERA_HOST_DEVICE W residual_sum(W stream, W branch) {
  return stream + branch;
}

// Two softmax-normalised attention outputs of one query row, over disjoint
// sets of keys, merged by their log-sum-exps (the online softmax's rescaling,
// Milakov & Gimelshein 2018, arXiv:1805.02867; ring attention's merge):
// L = log(e^La + e^Lb), out = e^(La − L)·a + e^(Lb − L)·b.
template <typename W>
struct LseMerge {
  W lse, keep, add;  // L, and the weights of a and of b
};
template <typename W>
TESSERA_HOST_DEVICE LseMerge<W> lse_merge(W running, W block) {
  const W top = running > block ? running : block;
  const W merged = top + std::log(std::exp(running - top) + std::exp(block - top));
  return {merged, std::exp(running - merged), std::exp(block - merged)};
}

// One gradient's contribution to the squared global norm (Pascanu et al.
// 2013, §3.2), unscaled by 1 / loss scale, in double: a sum of 10^9 squares
// of fp16 gradients neither overflows nor loses the small ones.
TESSERA_HOST_DEVICE double unscaled_square(double gradient, double unscale) {
  const double x = gradient * unscale;
  return x * x;
}

// LayerNorm (Ba et al. 2016, eq. 4) and RMSNorm (Zhang & Sennrich 2019, eq. 4):
// the reciprocal standard deviation of a row from its mean square (of
// deviations, for LayerNorm), the normalised value x̂ and the output.
template <typename W>
TESSERA_HOST_DEVICE W inverse_std(W mean_square, W eps) {
  return W(1) / std::sqrt(mean_square + eps);
}

template <typename W>
TESSERA_HOST_DEVICE W layernorm_xhat(W x, W mean, W rstd) {
  return (x - mean) * rstd;
}

template <typename W>
TESSERA_HOST_DEVICE W layernorm_out(W x, W mean, W rstd, W weight, W bias) {
  return (x - mean) * rstd * weight + bias;
}

template <typename W>
TESSERA_HOST_DEVICE W rmsnorm_out(W x, W rstd, W weight) {
  return x * rstd * weight;
}

// Input gradients, g = dout · weight (Ba et al. 2016, backprop of the normalisation):
// LayerNorm dx = rstd · (g − mean(g) − x̂ · mean(g · x̂));
// RMSNorm   dx = rstd · (g − x · rstd · mean(g · x̂)).
template <typename W>
TESSERA_HOST_DEVICE W layernorm_dinp(W dout, W weight, W xhat, W rstd, W g_mean, W gx_mean) {
  return rstd * (dout * weight - g_mean - xhat * gx_mean);
}

template <typename W>
TESSERA_HOST_DEVICE W rmsnorm_dinp(W dout, W weight, W x, W rstd, W gx_mean) {
  return rstd * (dout * weight - x * rstd * gx_mean);
}

// Softmax cross-entropy (Goodfellow et al. 2016, §6.2.2.3): a class's
// unnormalised probability e^(x − max) (the row's maximum keeps e^ finite),
// the loss −log p of the target, and d(loss)/dx = (p − onehot(target)) · scale,
// written as p · scale − scale so that it rounds as the CPU op always has.
template <typename W>
TESSERA_HOST_DEVICE W softmax_numerator(W x, W max) {
  return std::exp(x - max);
}

template <typename W>
TESSERA_HOST_DEVICE W cross_entropy_loss(W target_probability) {
  return -std::log(target_probability);
}

template <typename W>
TESSERA_HOST_DEVICE W cross_entropy_dlogit(W probability, bool is_target, W scale) {
  const W scaled = probability * scale;
  return is_target ? scaled - scale : scaled;
}

// Rotary embedding (Su et al. 2021, eq. 34): the frequency of pair i of a
// D-wide rotary slice, theta^(−2i/D), computed in double as the CPU op does
// (angles reach t · 1 for t up to the sequence length), and one pair's rotation
// by the angle whose cosine and sine are c, s (s negated for the inverse).
TESSERA_HOST_DEVICE double rope_inverse_frequency(double theta, int64_t i, int64_t rotary_dim) {
  return std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
}

template <typename W>
TESSERA_HOST_DEVICE void rope_rotate_pair(W& a, W& b, W c, W s) {
  const W a0 = a, b0 = b;
  a = a0 * c - b0 * s;
  b = b0 * c + a0 * s;
}

}  // namespace tessera::engine::math
