// ZeRO-Offload's transfer buffer on GPUs (device/offload_transfer.h): the
// in-place widening of the bf16 gradient shard, and the host optimizer
// rounding its weights over the gradients it has read, give what separate
// buffers give, bit for bit.
#include "tessera/engine/device/offload_transfer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/engine/optimizer.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {
namespace {

std::vector<bf16> values(int64_t n, float scale) {
  std::vector<bf16> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = narrow<bf16>(scale * std::sin(0.37f * static_cast<float>(i) + 0.1f));
  return out;
}

TEST(OffloadTransfer, WideningInPlaceMatchesAWideningCopy) {
  for (const int64_t n : {0, 1, 2, 3, 4, 5, 1000, 1001}) {
    const std::vector<bf16> gradients = values(n, 3.0f);
    std::vector<float> buffer(static_cast<size_t>(n) + 1, -1.0f);  // room for 4n bytes, and a guard after them
    std::memcpy(buffer.data(), gradients.data(), gradients.size() * sizeof(bf16));
    widen_bf16_in_place(buffer.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(buffer[static_cast<size_t>(i)], widen(gradients[static_cast<size_t>(i)])) << "n " << n << ", element " << i;
    EXPECT_EQ(buffer.back(), -1.0f) << "nothing written past 4n bytes";
  }
}

// An offloaded shard's update (two pieces with and without weight decay, a
// padding element): the optimizer whose 16-bit parameters live over its own
// fp32 gradients rounds the same bf16 weights as one with separate buffers.
TEST(OffloadTransfer, RoundingOverTheGradientsItReadMatchesSeparateBuffers) {
  const int64_t shard = 9;
  const std::vector<planner::ShardPiece> pieces{{0, 0, 0, 5}, {1, 3, 5, 3}};
  const std::vector<bool> decay{true, false};
  const std::vector<bf16> start = values(shard, 0.5f), gradients = values(shard, 0.02f);
  MemoryLedger ledger;
  std::vector<bf16> separate_params(start);
  std::vector<float> separate_gradients(static_cast<size_t>(shard));
  for (size_t i = 0; i < separate_gradients.size(); ++i) separate_gradients[i] = widen(gradients[i]);
  Optimizer<bf16> separate(ledger, separate_params.data(), shard, pieces, decay, OptimizerOptions{}, MemorySpace::host);

  std::vector<float> transfer(static_cast<size_t>(shard));  // the pinned buffer: 4 bytes an element
  std::memcpy(transfer.data(), start.data(), start.size() * sizeof(bf16));  // the weights the master copy starts from
  Optimizer<bf16> aliased(ledger, reinterpret_cast<bf16*>(transfer.data()), shard, pieces, decay, OptimizerOptions{}, MemorySpace::host);
  for (int step = 0; step < 3; ++step) {
    std::memcpy(transfer.data(), gradients.data(), gradients.size() * sizeof(bf16));  // the gradient shard, copied down
    widen_bf16_in_place(transfer.data(), shard);
    const double sum = Optimizer<bf16>::sum_of_squares(transfer.data(), shard, 1.0);
    ASSERT_EQ(sum, Optimizer<bf16>::sum_of_squares(separate_gradients.data(), shard, 1.0));
    ASSERT_TRUE(aliased.apply(static_cast<const float*>(transfer.data()), sum, 1.0).has_value());
    ASSERT_TRUE(separate.apply(static_cast<const float*>(separate_gradients.data()), sum, 1.0).has_value());
    ASSERT_EQ(std::memcmp(transfer.data(), separate_params.data(), separate_params.size() * sizeof(bf16)), 0) << "step " << step;
    ASSERT_EQ(std::memcmp(aliased.weights(), separate.weights(), static_cast<size_t>(shard) * sizeof(float)), 0) << "step " << step;
  }
}

}  // namespace
}  // namespace tessera::engine
