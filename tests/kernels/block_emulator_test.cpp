// The block emulator itself: barriers and shuffles behave as on a GPU, and
// the mistakes it exists to catch fail.
#include "block_emulator.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tessera/engine/kernels/block_reduce.h"

namespace tessera::engine::kernels::testing {
namespace {

// Every thread of 3 blocks of 96 sums 1..96 with block_sum: 4656 everywhere.
TEST(BlockEmulator, BlockSumReachesEveryThreadOfEveryBlock) {
  for (ThreadOrder order : {ThreadOrder::forward, ThreadOrder::reverse}) {
    std::vector<float> seen(3 * 96, 0.0f);
    BlockEmulator(order).launch({3, 96, 3 * sizeof(float)}, [&](HostContext& ctx) {
      const float total = block_sum(ctx, static_cast<float>(ctx.thread_idx() + 1), ctx.shared<float>());
      seen[ctx.block_idx() * 96 + ctx.thread_idx()] = total;
    });
    for (float s : seen) EXPECT_EQ(s, 4656.0f);
  }
}

// Thread t reads what thread t + 1 wrote to shared memory without a barrier
// in between: wrong in at least one thread order (here, forward: t + 1 has not run).
TEST(BlockEmulator, MissingBarrierGivesWrongResults) {
  auto run = [](ThreadOrder order, bool with_barrier) {
    std::vector<unsigned> read(64);
    BlockEmulator(order).launch({1, 64, 64 * sizeof(unsigned)}, [&](HostContext& ctx) {
      unsigned* s = ctx.shared<unsigned>();
      s[ctx.thread_idx()] = ctx.thread_idx();
      if (with_barrier) ctx.sync();
      read[ctx.thread_idx()] = s[(ctx.thread_idx() + 1) % 64];
    });
    return read;
  };
  std::vector<unsigned> expected(64);
  for (unsigned t = 0; t < 64; ++t) expected[t] = (t + 1) % 64;
  EXPECT_EQ(run(ThreadOrder::forward, true), expected);
  EXPECT_EQ(run(ThreadOrder::reverse, true), expected);
  EXPECT_NE(run(ThreadOrder::forward, false), expected);
}

TEST(BlockEmulator, BarrierNotReachedByEveryThreadFails) {
  BlockEmulator emulator(ThreadOrder::forward);
  EXPECT_THROW(emulator.launch({1, 64, 0},
                               [](HostContext& ctx) {
                                 if (ctx.thread_idx() < 32) ctx.sync();  // half the block returns early
                               }),
               std::logic_error);
}

TEST(BlockEmulator, FullMaskShuffleInAPartialWarpFails) {
  BlockEmulator emulator(ThreadOrder::forward);
  EXPECT_THROW(emulator.launch({1, 48, 0}, [](HostContext& ctx) { ctx.shfl_xor(1.0f, 1); }), std::logic_error);
}

TEST(BlockEmulator, ShuffleXorSwapsWithTheLanePartner) {
  std::vector<double> got(64);
  BlockEmulator(ThreadOrder::reverse).launch({1, 64, 0}, [&](HostContext& ctx) {
    const double a = ctx.shfl_xor(static_cast<double>(ctx.thread_idx()), 5);
    const double b = ctx.shfl_xor(a, 16);  // two in a row: the slots alternate
    got[ctx.thread_idx()] = b;
  });
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(got[t], static_cast<double>(t ^ 5u ^ 16u)) << t;
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
