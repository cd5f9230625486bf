// Casts under the block emulator against half.h's conversions (which
// tests/engine/mixed_precision_test.cpp checks against IEEE rounding): every
// bf16 and fp16 bit pattern widened to fp32, and fp32 values (random, ties,
// subnormals, overflow, inf, NaN) narrowed; the same bits expected.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/casts.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename H>
void check_casts() {
  std::vector<H> every(65536);
  for (uint32_t bits = 0; bits < 65536; ++bits) every[bits].bits = static_cast<uint16_t>(bits);
  std::vector<float> widened(every.size()), want_widened(every.size());
  for (size_t i = 0; i < every.size(); ++i) want_widened[i] = to_float(every[i]);
  BlockEmulator(ThreadOrder::forward).launch(elementwise_shape(65536), [&](HostContext& ctx) { cast_body(ctx, widened.data(), every.data(), 65536); });
  std::vector<uint32_t> got_bits(widened.size()), want_bits(widened.size());
  for (size_t i = 0; i < widened.size(); ++i) got_bits[i] = float_bits(widened[i]), want_bits[i] = float_bits(want_widened[i]);
  expect_bits_equal(std::string("cast ") + type_name<H>() + " -> fp32, every bit pattern", got_bits, want_bits);

  std::vector<float> values = random_values<float>(1001, 61, 1000.0f);
  for (float special : {0.0f, -0.0f, 65504.0f, 65520.0f, 1.0f + std::ldexp(1.0f, -8), std::ldexp(3.0f, -25), 3e38f, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    values.push_back(special);
  }
  const auto n = static_cast<int64_t>(values.size());
  std::vector<H> narrowed(values.size());
  BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(n), [&](HostContext& ctx) { cast_body(ctx, narrowed.data(), values.data(), n); });
  std::vector<uint16_t> got(values.size()), want(values.size());
  for (size_t i = 0; i < values.size(); ++i) got[i] = narrowed[i].bits, want[i] = narrow<H>(values[i]).bits;
  expect_bits_equal(std::string("cast fp32 -> ") + type_name<H>(), got, want);
}

TEST(KernelEmulation, CastsMatchHalfConversions) {
  check_casts<bf16>();
  check_casts<fp16>();
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
