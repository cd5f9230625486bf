// RoPE under the block emulator against the CPU op (ops/rope.h), forward and
// inverse, whole and partial rotary slices (GPT-NeoX's rotary_pct), heads
// inside wider rows (q within a fused q|k|v row), and a context-parallel
// rank's two chunks (cp 2, rank 1: 6 local tokens at positions 3-8 of 12):
// the same bits expected.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/rope.h"
#include "tessera/engine/ops/rope.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_rope(int64_t rotary_dim, bool inverse, planner::ContextSplit split = {}) {
  const int64_t B = 2, Tn = split.cp > 1 ? 6 : 5, H = 3, HS = 8, stride = H * HS + 7;
  const std::string at = std::string(type_name<T>()) + " rotary " + std::to_string(rotary_dim) + (inverse ? " inverse" : " forward") +
                         (split.cp > 1 ? " cp 2 rank 1" : "");
  const auto x = random_values<T>(B * Tn * stride, 81);
  std::vector<T> want = x, got = x;
  cpu::rope_rotate(want.data(), B, Tn, H, HS, stride, rotary_dim, 10000.0, inverse, split);
  BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(B * Tn * H * (rotary_dim / 2)), [&](HostContext& ctx) {
    rope_body(ctx, got.data(), B, Tn, H, HS, stride, rotary_dim, 10000.0, inverse, split);
  });
  expect_bits_equal("rope " + at, got, want);
}

TEST(KernelEmulation, RopeMatchesCpuOp) {
  for (int64_t rotary_dim : {8, 4, 2}) {
    for (bool inverse : {false, true}) {
      check_rope<float>(rotary_dim, inverse);
      check_rope<bf16>(rotary_dim, inverse);
      check_rope<fp16>(rotary_dim, inverse);
      check_rope<bf16>(rotary_dim, inverse, planner::ContextSplit{2, 1});
    }
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
