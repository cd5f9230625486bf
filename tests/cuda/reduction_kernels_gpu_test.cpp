// The kernels with block reductions on a GPU against the CPU ops, on the sizes
// the emulator tests use: LayerNorm and RMSNorm (forward, then backward from
// the CPU's statistics), the fused cross-entropy, the sum of squares and its
// overflow flag. Skipped without a CUDA device; run by tools/gpu-check.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "../kernels/kernel_check.h"
#include "../kernels/reference_cases.h"
#include "device_buffer.h"
#include "tessera/engine/cuda/cross_entropy.h"
#include "tessera/engine/cuda/norms.h"
#include "tessera/engine/cuda/sum_of_squares.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine::cuda::testing {
namespace {

using kernels::testing::CrossEntropyCase;
using kernels::testing::cross_entropy_case;
using kernels::testing::expect_close;
using kernels::testing::kNormEps;
using kernels::testing::layernorm_case;
using kernels::testing::NormCase;
using kernels::testing::rmsnorm_case;
using kernels::testing::random_values;
using kernels::testing::reduction_tolerance;
using kernels::testing::type_name;

struct NormSize {
  int64_t N, C;
};
const NormSize kNormSizes[] = {{1, 1}, {3, 1}, {5, 7}, {7, 33}, {2, 255}, {3, 257}, {70, 9}, {4, 768}, {512, 4096}};

using NormsOnGpu = GpuTest;

// A gradient that sums n terms, stored in T, against the CPU's: the fp32 sums
// differ by sum_tolerance(n) of the terms' magnitudes (nvcc's fused
// multiply-adds and the block's order of partial sums; first seen on an H100,
// data/measurements/2026-11-24-nvidia-h100-80gb-hbm3.json), and a 16-bit
// result may round to the neighbouring value.
template <typename T>
double gradient_tolerance(int64_t n_terms) {
  return std::max(reduction_tolerance<T>(), kernels::testing::sum_tolerance(n_terms));
}

template <typename T>
void check_layernorm(NormSize size) {
  const NormCase<T> c = layernorm_case<T>(size.N, size.C);
  const int64_t N = c.N, C = c.C;
  DeviceBuffer<T> inp(c.inp), weight(c.weight), bias(c.bias), dout(c.dout), out(N * C), dinp(c.dinp0), dweight(c.dweight0), dbias(c.dbias0);
  DeviceBuffer<float> mean(N), rstd(N), cpu_mean(c.mean), cpu_rstd(c.rstd);
  DeviceBuffer<char> workspace(norm_backward_workspace_bytes(N, C));
  EXPECT_EQ(layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), weight.get(), bias.get(), N, C, kNormEps, nullptr), cudaSuccess);
  EXPECT_EQ(layernorm_backward(dinp.get(), dweight.get(), dbias.get(), dout.get(), inp.get(), weight.get(), cpu_mean.get(), cpu_rstd.get(), N, C,
                               workspace.get(), nullptr),
            cudaSuccess);
  expect_close("gpu layernorm out " + c.at, out.host(), c.out, reduction_tolerance<T>());
  expect_close("gpu layernorm mean " + c.at, mean.host(), c.mean, reduction_tolerance<float>());
  expect_close("gpu layernorm rstd " + c.at, rstd.host(), c.rstd, reduction_tolerance<float>());
  expect_close("gpu layernorm dinp " + c.at, dinp.host(), c.dinp, gradient_tolerance<T>(C), c.dinp_magnitude);
  expect_close("gpu layernorm dweight " + c.at, dweight.host(), c.dweight, gradient_tolerance<T>(N), c.dweight_magnitude);
  expect_close("gpu layernorm dbias " + c.at, dbias.host(), c.dbias, gradient_tolerance<T>(N), c.dbias_magnitude);
}

template <typename T>
void check_rmsnorm(NormSize size) {
  const NormCase<T> c = rmsnorm_case<T>(size.N, size.C);
  const int64_t N = c.N, C = c.C;
  DeviceBuffer<T> inp(c.inp), weight(c.weight), dout(c.dout), out(N * C), dinp(c.dinp0), dweight(c.dweight0);
  DeviceBuffer<float> rstd(N), cpu_rstd(c.rstd);
  DeviceBuffer<char> workspace(norm_backward_workspace_bytes(N, C));
  EXPECT_EQ(rmsnorm_forward(out.get(), rstd.get(), inp.get(), weight.get(), N, C, kNormEps, nullptr), cudaSuccess);
  EXPECT_EQ(rmsnorm_backward(dinp.get(), dweight.get(), dout.get(), inp.get(), weight.get(), cpu_rstd.get(), N, C, workspace.get(), nullptr), cudaSuccess);
  expect_close("gpu rmsnorm out " + c.at, out.host(), c.out, reduction_tolerance<T>());
  expect_close("gpu rmsnorm rstd " + c.at, rstd.host(), c.rstd, reduction_tolerance<float>());
  expect_close("gpu rmsnorm dinp " + c.at, dinp.host(), c.dinp, gradient_tolerance<T>(C), c.dinp_magnitude);
  expect_close("gpu rmsnorm dweight " + c.at, dweight.host(), c.dweight, gradient_tolerance<T>(N), c.dweight_magnitude);
}

TEST_F(NormsOnGpu, LayerNormMatchesCpuOp) {
  for (const NormSize& size : kNormSizes) {
    check_layernorm<float>(size);
    check_layernorm<bf16>(size);
    check_layernorm<fp16>(size);
  }
}

TEST_F(NormsOnGpu, RmsNormMatchesCpuOp) {
  for (const NormSize& size : kNormSizes) {
    check_rmsnorm<float>(size);
    check_rmsnorm<bf16>(size);
    check_rmsnorm<fp16>(size);
  }
}

using CrossEntropyOnGpu = GpuTest;

template <typename T>
void check_cross_entropy(int64_t N, int64_t V, int64_t valid) {
  const CrossEntropyCase<T> c = cross_entropy_case<T>(N, V, valid);
  DeviceBuffer<T> logits(c.logits);
  DeviceBuffer<int32_t> targets(c.targets);
  DeviceBuffer<float> losses(N);
  EXPECT_EQ(fused_cross_entropy(losses.get(), logits.get(), targets.get(), N, V, valid, 1.0f, true, nullptr), cudaSuccess);
  // The softmax's denominator adds V positive terms, so its relative error,
  // and with it each probability's and the loss's absolute error, is sum_tolerance(V).
  expect_close("gpu cross-entropy losses " + c.at, losses.host(), c.losses, gradient_tolerance<float>(V));
  expect_close("gpu cross-entropy dlogits " + c.at, logits.host(), c.dlogits, gradient_tolerance<T>(V));
}

TEST_F(CrossEntropyOnGpu, FusedCrossEntropyMatchesCpuOp) {
  for (auto [N, V, valid] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {4, 31, 29}, {3, 513, 513}, {5, 1000, 997}, {64, 50304, 50257}}) {
    check_cross_entropy<float>(N, V, valid);
    check_cross_entropy<bf16>(N, V, valid);
    check_cross_entropy<fp16>(N, V, valid);
  }
}

using SumOfSquaresOnGpu = GpuTest;

template <typename G>
std::pair<double, int32_t> gpu_squares(const std::vector<G>& grads, double unscale) {
  const auto n = static_cast<int64_t>(grads.size());
  DeviceBuffer<G> d_grads(grads);
  DeviceBuffer<double> d_sum(1);
  DeviceBuffer<int32_t> d_overflow(1);
  DeviceBuffer<char> workspace(sum_of_squares_workspace_bytes(n));
  EXPECT_EQ(sum_of_squares(d_sum.get(), d_overflow.get(), d_grads.get(), n, unscale, workspace.get(), nullptr), cudaSuccess);
  return {d_sum.host()[0], d_overflow.host()[0]};
}

TEST_F(SumOfSquaresOnGpu, MatchesCpuOptimizerAndFlagsOverflow) {
  for (int64_t n : {int64_t{1}, int64_t{65535}, int64_t{65537}, int64_t{3 * 65536 + 5}, int64_t{50'000'000}}) {
    const auto grads = random_values<bf16>(n, 51, 100.0f);
    const double cpu = Optimizer<float>::sum_of_squares(grads.data(), n, 1.0);
    const auto [sum, overflow] = gpu_squares(grads, 1.0);
    expect_close("gpu sum of squares bf16 n " + std::to_string(n), std::vector<double>{sum / cpu}, std::vector<double>{1.0}, 1e-12);
    EXPECT_EQ(overflow, 0);
  }
  std::vector<fp16> grads = random_values<fp16>(65539, 53);
  grads.back() = narrow<fp16>(std::numeric_limits<float>::infinity());
  EXPECT_EQ(gpu_squares(grads, 1.0 / 65536).second, 1);
  grads.front() = narrow<fp16>(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(gpu_squares(grads, 1.0 / 65536).second, 1);
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
