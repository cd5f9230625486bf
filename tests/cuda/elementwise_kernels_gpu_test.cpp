// The element-wise kernels on a GPU against the CPU ops: AdamW, casts, GELU,
// SwiGLU, the residual add, RoPE and the embeddings. Casts and embeddings
// move or add bits exactly (the same bits expected); the others within
// elementwise_tolerance (the device's math functions and fused multiply-adds).
// Skipped without a CUDA device; run by tools/gpu-check.
#include <gtest/gtest.h>

#include <cmath>

#include <vector>

#include "../kernels/kernel_check.h"
#include "device_buffer.h"
#include "tessera/engine/cuda/activation.h"
#include "tessera/engine/cuda/adamw.h"
#include "tessera/engine/cuda/casts.h"
#include "tessera/engine/cuda/embedding.h"
#include "tessera/engine/cuda/residual.h"
#include "tessera/engine/cuda/rope.h"
#include "tessera/engine/ops/activation.h"
#include "tessera/engine/ops/embedding.h"
#include "tessera/engine/ops/residual.h"
#include "tessera/engine/ops/rope.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine::cuda::testing {
namespace {

using kernels::testing::elementwise_tolerance;
using kernels::testing::expect_bits_equal;
using kernels::testing::expect_close;
using kernels::testing::random_values;
using kernels::testing::type_name;

using ElementwiseOnGpu = GpuTest;

template <typename T>
void check_adamw(double loss_scale) {
  const int64_t n = 1'000'003;
  OptimizerOptions options;
  options.max_grad_norm = 0;
  const std::vector<T> params0 = random_values<T>(n, 31);
  std::vector<T> params = params0;
  MemoryLedger ledger;
  Optimizer<T> cpu(ledger, params.data(), n, {{0, 0, 0, n}}, {true}, options);
  std::vector<float> weights(n);
  for (int64_t i = 0; i < n; ++i) weights[i] = widen(params0[i]);
  DeviceBuffer<float> d_weights(weights), d_m(std::vector<float>(n, 0.0f)), d_v(std::vector<float>(n, 0.0f));
  DeviceBuffer<T> d_params(params0);
  for (int64_t step = 1; step <= 2; ++step) {
    const std::vector<T> grads = random_values<T>(n, 40 + static_cast<uint32_t>(step), static_cast<float>(loss_scale));
    ASSERT_TRUE(cpu.apply(grads.data(), 1.0, loss_scale).has_value());
    DeviceBuffer<T> d_grads(grads);
    const AdamWScalars scalars = adamw_scalars(options.learning_rate, options.beta1, options.beta2, options.eps, step, 1.0 / loss_scale);
    T* out = std::is_same_v<T, float> ? nullptr : d_params.get();
    EXPECT_EQ(adamw(out, d_weights.get(), d_m.get(), d_v.get(), d_grads.get(), n, static_cast<float>(options.weight_decay), scalars, nullptr), cudaSuccess);
  }
  const std::string at = std::string(type_name<T>()) + " n " + std::to_string(n);
  expect_close("gpu adamw weights " + at, d_weights.host(), std::vector<float>(cpu.weights(), cpu.weights() + n), elementwise_tolerance<float>());
  expect_close("gpu adamw exp_avg " + at, d_m.host(), std::vector<float>(cpu.state(0), cpu.state(0) + n), elementwise_tolerance<float>());
  expect_close("gpu adamw exp_avg_sq " + at, d_v.host(), std::vector<float>(cpu.state(1), cpu.state(1) + n), elementwise_tolerance<float>());
  if constexpr (!std::is_same_v<T, float>) expect_close("gpu adamw 16-bit parameters " + at, d_params.host(), params, elementwise_tolerance<T>());
}

TEST_F(ElementwiseOnGpu, AdamWMatchesCpuOptimizer) {
  check_adamw<float>(1.0);
  check_adamw<bf16>(1.0);
  check_adamw<fp16>(1024.0);
}

template <typename H>
void check_casts() {
  std::vector<H> every(65536);
  for (uint32_t bits = 0; bits < 65536; ++bits) every[bits].bits = static_cast<uint16_t>(bits);
  std::vector<float> widened(every.size());
  for (size_t i = 0; i < every.size(); ++i) widened[i] = to_float(every[i]);
  DeviceBuffer<H> d_every(every);
  DeviceBuffer<float> d_widened(every.size());
  EXPECT_EQ(cast(d_widened.get(), d_every.get(), 65536, nullptr), cudaSuccess);
  std::vector<uint32_t> got, want;
  for (float f : d_widened.host()) got.push_back(float_bits(f));
  for (float f : widened) want.push_back(float_bits(f));
  expect_bits_equal(std::string("gpu cast ") + type_name<H>() + " -> fp32", got, want);

  const std::vector<float> values = random_values<float>(100'001, 61, 1000.0f);
  DeviceBuffer<float> d_values(values);
  DeviceBuffer<H> d_narrowed(values.size());
  EXPECT_EQ(cast(d_narrowed.get(), d_values.get(), static_cast<int64_t>(values.size()), nullptr), cudaSuccess);
  std::vector<uint16_t> got16, want16;
  for (H h : d_narrowed.host()) got16.push_back(h.bits);
  for (float f : values) want16.push_back(narrow<H>(f).bits);
  expect_bits_equal(std::string("gpu cast fp32 -> ") + type_name<H>(), got16, want16);
}

TEST_F(ElementwiseOnGpu, CastsMatchHalfConversions) {
  check_casts<bf16>();
  check_casts<fp16>();
}

// GELU's derivative computes sech² = 1 − t² from t = tanh(u), which carries
// a few units of 1's last place (the device's exp, a division): the
// subtraction keeps that absolute error, and the derivative multiplies it by
// ½·x·√(2/π)·(1 + 3·0.044715·x²) — 186 at x = 15, where the true sech² is 0.
// So dout times that factor is what the output's error scales with.
template <typename T>
std::vector<double> gelu_backward_magnitudes(const std::vector<T>& x, const std::vector<T>& dout) {
  std::vector<double> magnitudes(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = widen(x[i]);
    magnitudes[i] = std::abs(widen(dout[i])) * 0.5 * std::abs(xi) * 0.7978845608028654 * (1 + 3 * 0.044715 * xi * xi);
  }
  return magnitudes;
}

template <typename T>
void check_activations(int64_t n) {
  const std::string at = std::string(type_name<T>()) + " n " + std::to_string(n);
  const auto x = random_values<T>(n, 71, 3.0f), up = random_values<T>(n, 72), dout = random_values<T>(n, 73);
  DeviceBuffer<T> d_x(x), d_up(up), d_dout(dout), d_out(n), d_dgate(n);
  std::vector<T> want(n), want_dgate(n), want_dup(n);
  cpu::gelu_forward(want.data(), x.data(), n);
  EXPECT_EQ(gelu_forward(d_out.get(), d_x.get(), n, nullptr), cudaSuccess);
  expect_close("gpu gelu forward " + at, d_out.host(), want, elementwise_tolerance<T>());
  cpu::gelu_backward(want.data(), x.data(), dout.data(), n);
  EXPECT_EQ(gelu_backward(d_out.get(), d_x.get(), d_dout.get(), n, nullptr), cudaSuccess);
  expect_close("gpu gelu backward " + at, d_out.host(), want, elementwise_tolerance<T>(), gelu_backward_magnitudes(x, dout));
  cpu::swiglu_forward(want.data(), x.data(), up.data(), n);
  EXPECT_EQ(swiglu_forward(d_out.get(), d_x.get(), d_up.get(), n, nullptr), cudaSuccess);
  expect_close("gpu swiglu forward " + at, d_out.host(), want, elementwise_tolerance<T>());
  cpu::swiglu_backward(want_dgate.data(), want_dup.data(), x.data(), up.data(), dout.data(), n);
  DeviceBuffer<T> d_dup(n);
  EXPECT_EQ(swiglu_backward(d_dgate.get(), d_dup.get(), d_x.get(), d_up.get(), d_dout.get(), n, nullptr), cudaSuccess);
  expect_close("gpu swiglu dgate " + at, d_dgate.host(), want_dgate, elementwise_tolerance<T>());
  expect_close("gpu swiglu dup " + at, d_dup.host(), want_dup, elementwise_tolerance<T>());
  std::vector<T> stream = up;
  cpu::add_in_place(stream.data(), x.data(), n);
  EXPECT_EQ(residual_add(d_up.get(), d_x.get(), n, nullptr), cudaSuccess);
  expect_bits_equal("gpu residual add " + at, d_up.host(), stream);  // one rounded addition: exact on both
}

TEST_F(ElementwiseOnGpu, GeluSwigluAndResidualMatchCpuOps) {
  for (int64_t n : {int64_t{1}, int64_t{257}, int64_t{3'000'001}}) {
    check_activations<float>(n);
    check_activations<bf16>(n);
    check_activations<fp16>(n);
  }
}

template <typename T>
void check_rope(int64_t rotary_dim, bool inverse) {
  const int64_t B = 4, Tn = 1024, H = 12, HS = 64, stride = 3 * H * HS;  // q within a fused q|k|v row
  const auto x = random_values<T>(B * Tn * stride, 81);
  std::vector<T> want = x;
  cpu::rope_rotate(want.data(), B, Tn, H, HS, stride, rotary_dim, 10000.0, inverse);
  DeviceBuffer<T> d_x(x);
  EXPECT_EQ(rope_rotate(d_x.get(), B, Tn, H, HS, stride, rotary_dim, 10000.0, inverse, nullptr), cudaSuccess);
  expect_close(std::string("gpu rope ") + type_name<T>() + " rotary " + std::to_string(rotary_dim) + (inverse ? " inverse" : ""), d_x.host(), want,
               elementwise_tolerance<T>());
}

TEST_F(ElementwiseOnGpu, RopeMatchesCpuOp) {
  for (int64_t rotary_dim : {64, 16}) {
    for (bool inverse : {false, true}) {
      check_rope<float>(rotary_dim, inverse);
      check_rope<bf16>(rotary_dim, inverse);
    }
  }
}

template <typename T>
void check_embedding(cpu::VocabSlice slice) {
  const int64_t B = 4, Tn = 64, C = 771, V = 1000, rows = B * Tn;
  std::vector<int32_t> tokens(rows);
  for (int64_t r = 0; r < rows; ++r) tokens[r] = static_cast<int32_t>((r * r) % 97);  // repeats
  const auto wte = random_values<T>(V * C, 91), wpe = random_values<T>(Tn * C, 92), dout = random_values<T>(rows * C, 93);
  const std::string at = std::string(type_name<T>()) + " slice from " + std::to_string(slice.first_class);
  std::vector<T> want(rows * C);
  cpu::embedding_forward(want.data(), tokens.data(), wte.data(), B, Tn, C, slice);
  cpu::position_embedding_forward(want.data(), wpe.data(), rows, Tn, C);
  DeviceBuffer<int32_t> d_tokens(tokens);
  DeviceBuffer<T> d_wte(wte), d_wpe(wpe), d_dout(dout), d_out(rows * C);
  EXPECT_EQ(embedding_forward(d_out.get(), d_tokens.get(), d_wte.get(), rows, C, slice, nullptr), cudaSuccess);
  EXPECT_EQ(position_embedding_forward(d_out.get(), d_wpe.get(), rows, Tn, C, 0, nullptr), cudaSuccess);
  expect_bits_equal("gpu embedding forward " + at, d_out.host(), want);

  std::vector<T> dwte(V * C, T{}), dwpe(Tn * C, T{});
  cpu::embedding_backward(dwte.data(), dout.data(), tokens.data(), B, Tn, C, slice);
  cpu::position_embedding_backward(dwpe.data(), dout.data(), B, Tn, C);
  DeviceBuffer<T> d_dwte(std::vector<T>(V * C, T{})), d_dwpe(std::vector<T>(Tn * C, T{}));
  EXPECT_EQ(embedding_backward(d_dwte.get(), d_dout.get(), d_tokens.get(), rows, C, slice, nullptr), cudaSuccess);
  EXPECT_EQ(position_embedding_backward(d_dwpe.get(), d_dout.get(), B, Tn, C, nullptr), cudaSuccess);
  expect_bits_equal("gpu embedding backward " + at, d_dwte.host(), dwte);
  expect_bits_equal("gpu position embedding backward " + at, d_dwpe.host(), dwpe);
}

TEST_F(ElementwiseOnGpu, EmbeddingsMatchCpuOps) {
  for (cpu::VocabSlice slice : {cpu::VocabSlice{}, cpu::VocabSlice{40, 30}}) {
    check_embedding<float>(slice);
    check_embedding<bf16>(slice);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
