// Central finite differences in double precision: every op's backward is
// checked against d(loss)/d(x) ≈ (loss(x + h) − loss(x − h)) / 2h, with
// loss = Σ out ⊙ R for a fixed random R (so dout = R).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tessera::engine::testing {

inline std::vector<double> random_vector(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Compares `analytic` with the finite-difference gradient of `loss` in `x`, at
// every element, or at `samples` elements spread over x when x is larger.
inline void expect_gradient(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic,
                            const std::function<double()>& loss, double tolerance = 1e-6, size_t samples = 0) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const double h = 1e-6;
  double worst = 0;
  const size_t stride = samples == 0 || x.size() <= samples ? 1 : x.size() / samples;
  for (size_t i = 0; i < x.size(); i += stride) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    const double error = std::abs(numeric - analytic[i]) / std::max(1.0, std::abs(numeric));
    worst = std::max(worst, error);
  }
  EXPECT_LT(worst, tolerance) << what << ": largest relative error " << worst;
}

}  // namespace tessera::engine::testing
