// The fused softmax + cross-entropy + gradient body under the block emulator
// against the CPU ops' forward then backward (ops/cross_entropy.h) on the
// same logits widened to fp32: vocabularies of 1, 3, 31, 513 and 1000 classes
// (fewer than a warp, one past the 512-thread block), padded columns (valid <
// V), targets at the first and last valid class.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/cross_entropy.h"
#include "tessera/engine/ops/cross_entropy.h"

namespace tessera::engine::kernels::testing {
namespace {

struct Size {
  int64_t N, V, valid;
};
const Size kSizes[] = {{1, 1, 1}, {3, 3, 3}, {4, 31, 29}, {3, 513, 513}, {5, 1000, 997}};

template <typename T>
void check_cross_entropy(Size size) {
  const auto [N, V, valid] = size;
  const std::string at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(V) + " valid " + std::to_string(valid);
  const std::vector<T> logits = random_values<T>(N * V, 21, 3.0f);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; ++n) targets[n] = static_cast<int32_t>(n == 0 ? valid - 1 : (n * 7919) % valid);  // the last valid class, then spread
  const float scale = 1.0f;  // dlogits = p − onehot: of order 1, so the absolute error bound bites
  // The CPU op, on fp32 logits: probabilities in place, then their gradient.
  std::vector<float> probs(N * V), losses(N);
  for (int64_t i = 0; i < N * V; ++i) probs[i] = widen(logits[i]);
  cpu::cross_entropy_forward(losses.data(), probs.data(), targets.data(), N, V, cpu::VocabSlice{0, valid});
  cpu::cross_entropy_backward(probs.data(), targets.data(), N, V, scale, cpu::VocabSlice{0, valid});
  std::vector<T> dlogits(N * V);
  for (int64_t i = 0; i < N * V; ++i) dlogits[i] = narrow<T>(probs[i]);

  std::vector<T> k_logits;
  std::vector<float> k_losses(N), k_losses_only(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    k_logits = logits;
    BlockEmulator(order).launch(cross_entropy_shape(N), [&](HostContext& ctx) {
      fused_cross_entropy_body(ctx, k_losses_only.data(), k_logits.data(), targets.data(), N, V, valid, scale, false);
    });
    EXPECT_EQ(std::memcmp(k_logits.data(), logits.data(), logits.size() * sizeof(T)), 0) << "losses only: the logits stay as they were";
    BlockEmulator(order).launch(cross_entropy_shape(N), [&](HostContext& ctx) {
      fused_cross_entropy_body(ctx, k_losses.data(), k_logits.data(), targets.data(), N, V, valid, scale, true);
    });
    return fingerprint(k_losses, k_losses_only, k_logits);
  });
  expect_bits_equal("cross-entropy losses with and without gradient " + at, k_losses_only, k_losses);
  expect_close("cross-entropy losses " + at, k_losses, losses, reduction_tolerance<float>());
  expect_close("cross-entropy dlogits " + at, k_logits, dlogits, reduction_tolerance<T>());
}

TEST(KernelEmulation, FusedCrossEntropyMatchesCpuOp) {
  for (const Size& size : kSizes) {
    check_cross_entropy<float>(size);
    check_cross_entropy<bf16>(size);
    check_cross_entropy<fp16>(size);
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
