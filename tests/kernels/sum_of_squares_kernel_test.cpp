// The gradients' sum of squares and overflow flag under the block emulator
// against Optimizer::sum_of_squares (optimizer.h): lengths of 1, one short of
// a 65536-element chunk, exactly one, one past, and 3 chunks + 5; a grid of 2
// blocks striding over 4 chunks; inf and NaN injected first and last.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/sum_of_squares.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename G>
std::pair<double, int32_t> emulate_squares(const std::vector<G>& grads, double unscale, LaunchShape partials_shape) {
  const auto n = static_cast<int64_t>(grads.size());
  std::vector<double> partials(static_cast<size_t>(squares_chunks(n)));
  double sum = 0;
  int32_t overflow = -1;
  BlockEmulator(ThreadOrder::reverse).launch(partials_shape, [&](HostContext& ctx) { squares_partials_body(ctx, partials.data(), grads.data(), n, unscale); });
  BlockEmulator(ThreadOrder::forward).launch(squares_total_shape(), [&](HostContext& ctx) {
    squares_total_body(ctx, &sum, &overflow, partials.data(), squares_chunks(n));
  });
  return {sum, overflow};
}

template <typename G>
void check_squares(int64_t n, double unscale) {
  const std::vector<G> grads = random_values<G>(n, 51, 100.0f);
  const double cpu = Optimizer<float>::sum_of_squares(grads.data(), n, unscale);
  const auto [sum, overflow] = emulate_squares(grads, unscale, squares_partials_shape(n));
  const std::string at = std::string(type_name<G>()) + " n " + std::to_string(n);
  // Doubles added in another order: relative error within a few units of 2^-53 per term.
  expect_close("sum of squares " + at, std::vector<double>{sum / cpu}, std::vector<double>{1.0}, 1e-12);
  EXPECT_EQ(overflow, 0) << at;
}

TEST(KernelEmulation, SumOfSquaresMatchesCpuOptimizer) {
  for (int64_t n : {int64_t{1}, kSquaresChunk - 1, kSquaresChunk, kSquaresChunk + 1, 3 * kSquaresChunk + 5}) {
    check_squares<float>(n, 1.0);
    check_squares<bf16>(n, 1.0);
    check_squares<fp16>(n, 1.0 / 1024);
  }
  // Two blocks striding over four chunks give the same sum as four blocks.
  const std::vector<float> grads = random_values<float>(3 * kSquaresChunk + 5, 52);
  LaunchShape two = squares_partials_shape(3 * kSquaresChunk + 5);
  two.grid = 2;
  EXPECT_EQ(emulate_squares(grads, 1.0, two).first, emulate_squares(grads, 1.0, squares_partials_shape(3 * kSquaresChunk + 5)).first);
}

TEST(KernelEmulation, OverflowCheckFlagsInfAndNan) {
  const int64_t n = kSquaresChunk + 3;
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    for (int64_t where : {int64_t{0}, n - 1}) {
      std::vector<fp16> grads = random_values<fp16>(n, 53);
      grads[static_cast<size_t>(where)] = narrow<fp16>(bad);
      const auto [sum, overflow] = emulate_squares(grads, 1.0 / 65536, squares_partials_shape(n));
      EXPECT_EQ(overflow, 1) << bad << " at " << where;
      EXPECT_FALSE(std::isfinite(sum));
      EXPECT_FALSE(std::isfinite(Optimizer<float>::sum_of_squares(grads.data(), n, 1.0 / 65536))) << "the CPU agrees";
    }
  }
  // The largest fp16 everywhere is no overflow: its squares add up in double.
  const std::vector<fp16> largest(static_cast<size_t>(n), narrow<fp16>(65504.0f));
  EXPECT_EQ(emulate_squares(largest, 1.0, squares_partials_shape(n)).second, 0);
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
