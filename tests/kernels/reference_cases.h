// Inputs, and what the CPU ops make of them, for the kernels whose partial
// sums add in another order than the CPU's: built once here for the emulator
// tests (tests/kernels) and the GPU tests (tests/cuda).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_check.h"
#include "tessera/engine/ops/cross_entropy.h"
#include "tessera/engine/ops/layernorm.h"

namespace tessera::engine::kernels::testing {

inline constexpr float kNormEps = 1e-5f;

// A norm over N rows of C: inputs, starting gradients (backward accumulates
// into them) and the CPU's forward outputs and gradients. RMSNorm has no bias
// and no mean (left empty).
template <typename T>
struct NormCase {
  int64_t N = 0, C = 0;
  std::string at;  // "bf16 7x33", for messages
  std::vector<T> inp, weight, bias, dout, dinp0, dweight0, dbias0;
  std::vector<T> out, dinp, dweight, dbias;
  std::vector<float> mean, rstd;
  // What each gradient's rounding error scales with (max_error's magnitudes):
  // the Σ|x| of the terms its sums add, the starting gradient included.
  std::vector<double> dinp_magnitude, dweight_magnitude, dbias_magnitude;
};

// The magnitudes of a norm's gradient terms. With n = (x − mean)·rstd (RMSNorm:
// x·rstd) and g = weight·dout, LayerNorm's dinp = rstd·(g − mean(g) − n·mean(g·n))
// (RMSNorm's has no mean(g) term), dweight = Σ_rows dout·n, dbias = Σ_rows dout.
// A row of C = 1 is the extreme case: rstd = 1/√eps multiplies a difference
// of equal terms, so dinp is rounding noise of size rstd·|g|.
template <typename T>
void set_norm_gradient_magnitudes(NormCase<T>& c, bool centred) {
  const int64_t N = c.N, C = c.C;
  c.dinp_magnitude.assign(N * C, 0.0), c.dweight_magnitude.assign(C, 0.0), c.dbias_magnitude.assign(C, 0.0);
  for (int64_t j = 0; j < C; ++j) {
    c.dweight_magnitude[j] = std::abs(widen(c.dweight0[j]));
    if (centred) c.dbias_magnitude[j] = std::abs(widen(c.dbias0[j]));
  }
  for (int64_t row = 0; row < N; ++row) {
    const double rstd = c.rstd[row], mean = centred ? c.mean[row] : 0.0;
    double mean_abs_g = 0, mean_abs_gn = 0;
    std::vector<double> norm(C), g(C);
    for (int64_t j = 0; j < C; ++j) {
      const double dout = widen(c.dout[row * C + j]);
      norm[j] = (widen(c.inp[row * C + j]) - mean) * rstd;
      g[j] = widen(c.weight[j]) * dout;
      mean_abs_g += std::abs(g[j]) / C, mean_abs_gn += std::abs(g[j] * norm[j]) / C;
      c.dweight_magnitude[j] += std::abs(dout * norm[j]);
      if (centred) c.dbias_magnitude[j] += std::abs(dout);
    }
    for (int64_t j = 0; j < C; ++j) {
      c.dinp_magnitude[row * C + j] = std::abs(widen(c.dinp0[row * C + j])) +
                                      rstd * (std::abs(g[j]) + (centred ? mean_abs_g : 0.0) + std::abs(norm[j]) * mean_abs_gn);
    }
  }
}

template <typename T>
NormCase<T> norm_inputs(int64_t N, int64_t C, bool with_bias) {
  NormCase<T> c;
  c.N = N, c.C = C;
  c.at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(C);
  c.inp = random_values<T>(N * C, 1, 2.0f, 0.5f), c.weight = random_values<T>(C, 2), c.dout = random_values<T>(N * C, 4);
  c.dinp0 = random_values<T>(N * C, 5), c.dweight0 = random_values<T>(C, 6);
  if (with_bias) c.bias = random_values<T>(C, 3), c.dbias0 = random_values<T>(C, 7);
  c.out.resize(N * C), c.rstd.resize(N);
  c.dinp = c.dinp0, c.dweight = c.dweight0, c.dbias = c.dbias0;
  return c;
}

template <typename T>
NormCase<T> layernorm_case(int64_t N, int64_t C) {
  NormCase<T> c = norm_inputs<T>(N, C, true);
  c.mean.resize(N);
  cpu::layernorm_forward(c.out.data(), c.mean.data(), c.rstd.data(), c.inp.data(), c.weight.data(), c.bias.data(), N, C, kNormEps);
  cpu::layernorm_backward(c.dinp.data(), c.dweight.data(), c.dbias.data(), c.dout.data(), c.inp.data(), c.weight.data(), c.mean.data(), c.rstd.data(), N, C);
  set_norm_gradient_magnitudes(c, true);
  return c;
}

template <typename T>
NormCase<T> rmsnorm_case(int64_t N, int64_t C) {
  NormCase<T> c = norm_inputs<T>(N, C, false);
  cpu::rmsnorm_forward(c.out.data(), c.rstd.data(), c.inp.data(), c.weight.data(), N, C, kNormEps);
  cpu::rmsnorm_backward(c.dinp.data(), c.dweight.data(), c.dout.data(), c.inp.data(), c.weight.data(), c.rstd.data(), N, C);
  set_norm_gradient_magnitudes(c, false);
  return c;
}

// Cross-entropy over N rows of V logits (the first `valid` real classes):
// the CPU op's losses and its gradient (p − onehot, scale 1: of order 1, so
// an absolute error bound bites) on the logits widened to fp32, rounded to T.
template <typename T>
struct CrossEntropyCase {
  int64_t N = 0, V = 0, valid = 0;
  std::string at;
  std::vector<T> logits, dlogits;
  std::vector<int32_t> targets;
  std::vector<float> losses;
};

template <typename T>
CrossEntropyCase<T> cross_entropy_case(int64_t N, int64_t V, int64_t valid) {
  CrossEntropyCase<T> c;
  c.N = N, c.V = V, c.valid = valid;
  c.at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(V) + " valid " + std::to_string(valid);
  c.logits = random_values<T>(N * V, 21, 3.0f);
  c.targets.resize(N);
  for (int64_t n = 0; n < N; ++n) c.targets[n] = static_cast<int32_t>(n == 0 ? valid - 1 : (n * 7919) % valid);  // the last valid class, then spread
  std::vector<float> probs(N * V);
  for (int64_t i = 0; i < N * V; ++i) probs[i] = widen(c.logits[i]);
  c.losses.resize(N);
  cpu::cross_entropy_forward(c.losses.data(), probs.data(), c.targets.data(), N, V, cpu::VocabSlice{0, valid});
  cpu::cross_entropy_backward(probs.data(), c.targets.data(), N, V, 1.0f, cpu::VocabSlice{0, valid});
  c.dlogits.resize(N * V);
  for (int64_t i = 0; i < N * V; ++i) c.dlogits[i] = narrow<T>(probs[i]);
  return c;
}

}  // namespace tessera::engine::kernels::testing
