// What kernel tests share, under the emulator and on a GPU: random inputs in
// a storage type, the tolerance of each type, and the largest error of a
// kernel's output against the CPU op's, recorded as a test property
// (`max_error`, in gtest's XML/JSON output) and printed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/engine/half.h"

namespace tessera::engine::kernels::testing {

template <typename T>
std::vector<T> random_values(size_t n, uint32_t seed, float scale = 1.0f, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(offset, scale);
  std::vector<T> v(n);
  for (T& x : v) x = narrow<T>(normal(rng));
  return v;
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bf16>) {
    return "bf16";
  } else if constexpr (std::is_same_v<T, fp16>) {
    return "fp16";
  } else {
    return "fp32";
  }
}

// The tolerance of an output stored in T against the CPU op's, when the two
// add their partial sums in different orders: fp32 differs in the last few of
// its 24 bits (2^-17 leaves 128 units for sums of up to 8192 terms); a 16-bit
// output may round to the neighbouring value, one unit in the last place of
// its 8 (bf16) or 11 (fp16) significant bits.
template <typename T>
double reduction_tolerance() {
  if constexpr (std::is_same_v<T, bf16>) {
    return std::ldexp(1.0, -7);
  } else if constexpr (std::is_same_v<T, fp16>) {
    return std::ldexp(1.0, -10);
  } else {
    return std::ldexp(1.0, -17);
  }
}

// The tolerance of an element-wise kernel on a GPU against the CPU op: the
// device's exp, log, sin and cos are within 1-2 units in the last place
// (CUDA C++ Programming Guide, "Mathematical Functions", maximum ulp error
// tables) and nvcc fuses a · b + c into one rounding (--fmad=true), so fp32
// results differ in their last bits (2^-20: 8 units) and 16-bit ones may
// round to the neighbouring value.
template <typename T>
double elementwise_tolerance() {
  if constexpr (std::is_same_v<T, float>) {
    return std::ldexp(1.0, -20);
  } else {
    return reduction_tolerance<T>();
  }
}

// The tolerance of an fp32 sum of n terms that two programs add in different
// orders (a GPU's tree of partial sums against the CPU's loop, fused
// multiply-adds or not), relative to the sum of the terms' magnitudes Σ|x|:
// each program's error stays below λ·√n·u·Σ|x| with high probability (Higham
// and Mary, "A New Approach to Probabilistic Rounding Error Analysis", SIAM J.
// Sci. Comput. 41(5), 2019, Theorem 3.1; u = 2^-24, λ = 4), and the two
// programs' results differ by at most twice that. Not the worst case, (n−1)·u·Σ|x|,
// which no real sum comes near.
inline double sum_tolerance(int64_t n_terms) {
  return 2 * 4 * std::sqrt(static_cast<double>(n_terms)) * std::ldexp(1.0, -24);
}

// max |got − want| / max(1, |want|, magnitude): relative for large values,
// absolute near 0. `magnitudes`, where given, is what each output's rounding
// error scales with when that is more than the output itself: the Σ|x| of
// the terms a sum cancels, or the factor an ill-conditioned formula
// multiplies an input's error by.
template <typename A, typename B>
double max_error(const std::vector<A>& got, const std::vector<B>& want, const std::vector<double>& magnitudes = {}) {
  EXPECT_EQ(got.size(), want.size());
  EXPECT_TRUE(magnitudes.empty() || magnitudes.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double g = static_cast<double>(widen(got[i])), w = static_cast<double>(widen(want[i]));
    const double scale = std::max({1.0, std::abs(w), magnitudes.empty() ? 0.0 : magnitudes[i]});
    const double error = std::abs(g - w) / scale;
    worst = std::isnan(error) || std::isnan(worst) ? NAN : std::max(worst, error);
  }
  return worst;
}

// Expects max_error(got, want, magnitudes) <= tolerance, records and prints it under `what`.
template <typename A, typename B>
void expect_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& want, double tolerance,
                  const std::vector<double>& magnitudes = {}) {
  const double error = max_error(got, want, magnitudes);
  ::testing::Test::RecordProperty("max_error " + what, std::to_string(error));
  std::printf("  %-48s max error %.3g (tolerance %.3g)\n", what.c_str(), error, tolerance);
  EXPECT_LE(error, tolerance) << what;
}

// The same bits: the kernel computes exactly what the CPU op computes.
template <typename A>
void expect_bits_equal(const std::string& what, const std::vector<A>& got, const std::vector<A>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) differing += std::memcmp(&got[i], &want[i], sizeof(A)) != 0;
  ::testing::Test::RecordProperty("differing " + what, std::to_string(differing));
  std::printf("  %-48s %zu of %zu elements differ\n", what.c_str(), differing, got.size());
  EXPECT_EQ(differing, 0u) << what;
}

}  // namespace tessera::engine::kernels::testing
