// The fused softmax + cross-entropy + gradient body under the block emulator
// against the CPU ops' forward then backward (ops/cross_entropy.h) on the
// same logits widened to fp32: vocabularies of 1, 3, 31, 513 and 1000 classes
// (fewer than a warp, one past the 512-thread block), padded columns (valid <
// V), targets at the first and last valid class.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "reference_cases.h"
#include "tessera/engine/kernels/cross_entropy.h"

namespace tessera::engine::kernels::testing {
namespace {

struct Size {
  int64_t N, V, valid;
};
const Size kSizes[] = {{1, 1, 1}, {3, 3, 3}, {4, 31, 29}, {3, 513, 513}, {5, 1000, 997}};

template <typename T>
void check_cross_entropy(Size size) {
  const CrossEntropyCase<T> c = cross_entropy_case<T>(size.N, size.V, size.valid);
  const int64_t N = c.N, V = c.V, valid = c.valid;
  std::vector<T> logits;
  std::vector<float> losses(N), losses_only(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    logits = c.logits;
    BlockEmulator(order).launch(cross_entropy_shape(N), [&](HostContext& ctx) {
      fused_cross_entropy_body(ctx, losses_only.data(), logits.data(), c.targets.data(), N, V, valid, 1.0f, false);
    });
    EXPECT_EQ(std::memcmp(logits.data(), c.logits.data(), logits.size() * sizeof(T)), 0) << "losses only: the logits stay as they were";
    BlockEmulator(order).launch(cross_entropy_shape(N), [&](HostContext& ctx) {
      fused_cross_entropy_body(ctx, losses.data(), logits.data(), c.targets.data(), N, V, valid, 1.0f, true);
    });
    return fingerprint(losses, losses_only, logits);
  });
  expect_bits_equal("cross-entropy losses with and without gradient " + c.at, losses_only, losses);
  expect_close("cross-entropy losses " + c.at, losses, c.losses, reduction_tolerance<float>());
  expect_close("cross-entropy dlogits " + c.at, logits, c.dlogits, reduction_tolerance<T>());
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
