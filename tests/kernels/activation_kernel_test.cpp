// The element-wise bodies under the block emulator against the CPU ops: GELU
// and SwiGLU (ops/activation.h), the residual add (ops/residual.h), on 1, 255,
// 257 and 1000 elements, SwiGLU's backward with dout aliasing dup as the
// transformer calls it, and FSDP's addition of a reduced bf16 gradient into
// its fp32 shard (the CPU FSDP's shard[i] += widen(own[i]), parallel/fsdp.cpp):
// the same bits expected.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/activation.h"
#include "tessera/engine/kernels/residual.h"
#include "tessera/engine/ops/activation.h"
#include "tessera/engine/ops/residual.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_activations(int64_t n) {
  const std::string at = std::string(type_name<T>()) + " n " + std::to_string(n);
  const auto x = random_values<T>(n, 71, 3.0f), up = random_values<T>(n, 72), dout = random_values<T>(n, 73);
  const LaunchShape shape = elementwise_shape(n);
  auto emulate = [&](auto body) { BlockEmulator(ThreadOrder::reverse).launch(shape, body); };

  std::vector<T> want(n), got(n);
  cpu::gelu_forward(want.data(), x.data(), n);
  emulate([&](HostContext& ctx) { gelu_forward_body(ctx, got.data(), x.data(), n); });
  expect_bits_equal("gelu forward " + at, got, want);
  cpu::gelu_backward(want.data(), x.data(), dout.data(), n);
  emulate([&](HostContext& ctx) { gelu_backward_body(ctx, got.data(), x.data(), dout.data(), n); });
  expect_bits_equal("gelu backward " + at, got, want);
  cpu::swiglu_forward(want.data(), x.data(), up.data(), n);
  emulate([&](HostContext& ctx) { swiglu_forward_body(ctx, got.data(), x.data(), up.data(), n); });
  expect_bits_equal("swiglu forward " + at, got, want);

  std::vector<T> want_dgate(n), want_dup = dout, got_dgate(n), got_dup = dout;  // dout aliases dup
  cpu::swiglu_backward(want_dgate.data(), want_dup.data(), x.data(), up.data(), want_dup.data(), n);
  emulate([&](HostContext& ctx) { swiglu_backward_body(ctx, got_dgate.data(), got_dup.data(), x.data(), up.data(), got_dup.data(), n); });
  expect_bits_equal("swiglu dgate " + at, got_dgate, want_dgate);
  expect_bits_equal("swiglu dup " + at, got_dup, want_dup);

  std::vector<T> want_stream = up, got_stream = up;
  cpu::add_in_place(want_stream.data(), x.data(), n);
  emulate([&](HostContext& ctx) { residual_add_body(ctx, got_stream.data(), x.data(), n); });
  expect_bits_equal("residual add " + at, got_stream, want_stream);
}

TEST(KernelEmulation, GeluSwigluAndResidualMatchCpuOps) {
  for (int64_t n : {1, 255, 257, 1000}) {
    check_activations<float>(n);
    check_activations<bf16>(n);
    check_activations<fp16>(n);
  }
}

TEST(KernelEmulation, ResidualAddOfBf16IntoFp32IsTheCpuFsdpsAddition) {
  for (int64_t n : {1, 255, 257, 1000}) {
    const auto reduced = random_values<bf16>(n, 74);
    const auto shard = random_values<float>(n, 75);
    std::vector<float> want = shard, got = shard;
    for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] += widen(reduced[static_cast<size_t>(i)]);
    BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(n), [&](HostContext& ctx) { residual_add_body(ctx, got.data(), reduced.data(), n); });
    expect_bits_equal("fp32 += bf16, n " + std::to_string(n), got, want);
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
