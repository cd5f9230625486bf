// The one-rank communicator (every collective a copy), the argument checks and
// counters every backend shares, and the rank-order reduction the backends use.
// The MPI backend is tested under mpirun by mpi_communicator_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tessera/engine/comm/local.h"
#include "tessera/engine/comm/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

// A Status as a gtest assertion, so that a failure prints the message.
::testing::AssertionResult succeeded(const Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << status.error().message;
}

TEST(LocalCommunicator, IsOneRankNamedWorld) {
  auto world = make_local_communicator();
  EXPECT_EQ(world->rank(), 0);
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->world_rank(), 0);
  EXPECT_EQ(world->name(), "world");
}

TEST(LocalCommunicator, EveryCollectiveCopiesOrLeavesInPlace) {
  auto world = make_local_communicator();
  const std::vector<float> input{1.5f, -2.0f, 3.25f};
  std::vector<float> out(3, 0.0f);

  ASSERT_TRUE(succeeded(world->all_reduce(input.data(), out.data(), 3, ReduceOp::sum)));
  EXPECT_EQ(out, input);
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_TRUE(succeeded(world->all_reduce(input.data(), out.data(), 3, ReduceOp::max)));
  EXPECT_EQ(out, input);
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_TRUE(succeeded(world->reduce_scatter(input.data(), out.data(), 3, ReduceOp::sum)));
  EXPECT_EQ(out, input);
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_TRUE(succeeded(world->reduce_scatter_v(input.data(), out.data(), std::vector<size_t>{3}, DataType::f32, ReduceOp::sum)));
  EXPECT_EQ(out, input);
  EXPECT_EQ(world->counters().bytes_of(Collective::reduce_scatter), 2 * 3 * 4);  // counted as reduce_scatters
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_TRUE(succeeded(world->all_gather(input.data(), out.data(), 3)));
  EXPECT_EQ(out, input);
  std::fill(out.begin(), out.end(), 0.0f);
  ASSERT_TRUE(succeeded(world->broadcast(input.data(), out.data(), 3, 0)));
  EXPECT_EQ(out, input);
  ASSERT_TRUE(succeeded(world->barrier()));

  std::vector<double> in_place{4.0, 5.0};
  ASSERT_TRUE(succeeded(world->all_reduce(in_place.data(), in_place.data(), 2, ReduceOp::sum)));
  ASSERT_TRUE(succeeded(world->reduce_scatter(in_place.data(), in_place.data(), 2, ReduceOp::sum)));
  ASSERT_TRUE(succeeded(world->all_gather(in_place.data(), in_place.data(), 2)));
  ASSERT_TRUE(succeeded(world->broadcast(in_place.data(), in_place.data(), 2, 0)));
  EXPECT_EQ(in_place, (std::vector<double>{4.0, 5.0}));
}

TEST(LocalCommunicator, CountsThePayloadOfEveryKindOfCall) {
  auto world = make_local_communicator();
  std::vector<float> f(10, 1.0f), g(10);
  std::vector<double> d(4, 1.0), e(4);
  ASSERT_TRUE(succeeded(world->all_reduce(f.data(), g.data(), 10, ReduceOp::sum)));  // 40 bytes
  ASSERT_TRUE(succeeded(world->all_reduce(f.data(), g.data(), 3, ReduceOp::max)));   // 12 bytes
  ASSERT_TRUE(succeeded(world->reduce_scatter(d.data(), e.data(), 4, ReduceOp::sum)));  // size 1 · 4 · 8
  ASSERT_TRUE(succeeded(world->all_gather(f.data(), g.data(), 5)));                  // size 1 · 5 · 4
  ASSERT_TRUE(succeeded(world->broadcast(d.data(), e.data(), 2, 0)));                // 16
  ASSERT_TRUE(succeeded(world->barrier()));
  ASSERT_TRUE(succeeded(world->all_reduce(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, ReduceOp::sum)));  // a no-op, counted

  const CommCounters& c = world->counters();
  EXPECT_EQ(c.calls_of(Collective::all_reduce), 3);
  EXPECT_EQ(c.bytes_of(Collective::all_reduce), 52);
  EXPECT_EQ(c.calls_of(Collective::reduce_scatter), 1);
  EXPECT_EQ(c.bytes_of(Collective::reduce_scatter), 32);
  EXPECT_EQ(c.bytes_of(Collective::all_gather), 20);
  EXPECT_EQ(c.bytes_of(Collective::broadcast), 16);
  EXPECT_EQ(c.calls_of(Collective::barrier), 1);
  EXPECT_EQ(c.bytes_of(Collective::barrier), 0);
  EXPECT_EQ(c.calls_of(Collective::send), 0);
  EXPECT_EQ(enum_name(Collective::reduce_scatter), "reduce_scatter");
}

TEST(LocalCommunicator, BadArgumentsReturnAStatusNamingTheCallGroupAndRank) {
  auto world = make_local_communicator();
  std::vector<float> buffer(8, 0.0f);

  const Status root = world->broadcast(buffer.data(), buffer.data(), 4, 1);
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(root.error().message, "broadcast on 'world' (rank 0 of 1, world rank 0): root 1 is not a rank of this group (0..0)");

  // A group of one has no peer: rank 0 is itself.
  EXPECT_FALSE(world->send(buffer.data(), 4, 0));
  EXPECT_FALSE(world->recv(buffer.data(), 4, 0));
  EXPECT_FALSE(world->send(buffer.data(), 4, -1));

  // Overlaps other than the documented in-place positions.
  const Status overlap = world->all_reduce(buffer.data(), buffer.data() + 1, 4, ReduceOp::sum);
  ASSERT_FALSE(overlap);
  EXPECT_NE(overlap.error().message.find("all_reduce on 'world'"), std::string::npos);
  EXPECT_FALSE(world->reduce_scatter(buffer.data(), buffer.data() + 2, 4, ReduceOp::sum));
  EXPECT_FALSE(world->all_gather(buffer.data() + 3, buffer.data(), 4));
  EXPECT_FALSE(world->broadcast(buffer.data() + 1, buffer.data(), 4, 0));

  EXPECT_FALSE(world->all_reduce(static_cast<const float*>(nullptr), buffer.data(), 4, ReduceOp::sum));
  EXPECT_FALSE(world->broadcast(buffer.data(), static_cast<float*>(nullptr), 4, 0));
  const Status huge = world->all_gather(buffer.data(), buffer.data(), std::numeric_limits<size_t>::max() / 2);
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("too large"), std::string::npos);

  // Failed calls move nothing and are not counted.
  for (int64_t calls : world->counters().calls) EXPECT_EQ(calls, 0);
}

TEST(LocalCommunicator, StartedAllReducesFinishInOrderAndAreCountedOnce) {
  auto world = make_local_communicator();
  std::vector<float> a{1, 2, 3}, b{4, 5};
  ASSERT_TRUE(world->start_all_reduce(a.data(), a.data(), 3, ReduceOp::sum).ok());
  ASSERT_TRUE(world->start_all_reduce(b.data(), b.data(), 2, ReduceOp::sum).ok());
  EXPECT_EQ(world->started_calls(), 2u);
  const Status refused = world->barrier();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "barrier on 'world' (rank 0 of 1, world rank 0): 2 started call(s) are pending; call finish_started() first");
  ASSERT_TRUE(world->progress().ok());  // one rank: the calls completed when started
  EXPECT_EQ(world->started_calls(), 0u);
  ASSERT_TRUE(world->finish_started().ok());
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(world->counters().calls_of(Collective::all_reduce), 2);
  EXPECT_EQ(world->counters().bytes_of(Collective::all_reduce), 20);
  EXPECT_EQ(world->counters().calls_of(Collective::barrier), 0);
  const Status bad = world->start_all_reduce(a.data(), a.data() + 1, 2, ReduceOp::sum);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("all_reduce on 'world'"), std::string::npos);
  EXPECT_EQ(world->started_calls(), 0u);
}

// A started reduce_scatter_v (ZeRO's overlapped bucket) shares the blocking
// call's checks, is counted as a reduce_scatter once finished, and
// finish_oldest completes only the oldest calls.
TEST(LocalCommunicator, StartedReduceScattersAreCheckedCountedAndFinishedOldestFirst) {
  auto world = make_local_communicator();
  std::vector<float> bucket{1, 2, 3}, out(3, 0.0f);
  std::vector<float> other{4, 5};
  ASSERT_TRUE(world->start_reduce_scatter_v(bucket.data(), out.data(), {3}, DataType::f32, ReduceOp::sum).ok());
  ASSERT_TRUE(world->start_all_reduce(other.data(), other.data(), 2, ReduceOp::sum).ok());
  ASSERT_TRUE(world->start_reduce_scatter_v(other.data(), other.data(), {2}, DataType::f32, ReduceOp::sum).ok()) << "in place";
  EXPECT_EQ(world->started_calls(), 3u);
  ASSERT_TRUE(world->finish_oldest(2).ok());
  EXPECT_EQ(world->started_calls(), 1u) << "the youngest stays pending";
  EXPECT_EQ(world->counters().calls_of(Collective::reduce_scatter), 1);
  EXPECT_EQ(world->counters().bytes_of(Collective::reduce_scatter), 12);
  ASSERT_TRUE(world->finish_oldest(5).ok()) << "more than are pending: all of them";
  EXPECT_EQ(world->started_calls(), 0u);
  EXPECT_EQ(out, bucket);
  EXPECT_EQ(world->counters().calls_of(Collective::reduce_scatter), 2);
  EXPECT_EQ(world->counters().bytes_of(Collective::reduce_scatter), 20);
  const Status bad = world->start_reduce_scatter_v(bucket.data(), bucket.data() + 1, {2}, DataType::f32, ReduceOp::sum);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "reduce_scatter on 'world' (rank 0 of 1, world rank 0): recv is null or overlaps send other than in place (send + this rank's offset); make "
            "them disjoint");
  const Status counts = world->start_reduce_scatter_v(bucket.data(), out.data(), {1, 2}, DataType::f32, ReduceOp::sum);
  ASSERT_FALSE(counts.ok());
  EXPECT_EQ(counts.error().message, "reduce_scatter on 'world' (rank 0 of 1, world rank 0): 2 counts for a group of 1 ranks");
  EXPECT_EQ(world->started_calls(), 0u);
}

// A started all_gather (FSDP's prefetch) shares the blocking call's checks,
// is counted as an all_gather once finished, in order with the other started calls.
TEST(LocalCommunicator, StartedAllGathersAreCheckedCountedAndFinishedInOrder) {
  auto world = make_local_communicator();
  std::vector<float> unit{1, 2, 3}, gathered(3, 0.0f), gradient{4, 5};
  ASSERT_TRUE(world->start_all_gather(unit.data(), gathered.data(), 3, DataType::f32).ok());
  ASSERT_TRUE(world->start_reduce_scatter_v(gradient.data(), gradient.data(), {2}, DataType::f32, ReduceOp::sum).ok());
  ASSERT_TRUE(world->start_all_gather(unit.data(), unit.data(), 3, DataType::f32).ok()) << "in place";
  ASSERT_TRUE(world->finish_oldest(1).ok());
  EXPECT_EQ(world->started_calls(), 2u);
  EXPECT_EQ(world->counters().calls_of(Collective::all_gather), 1);
  EXPECT_EQ(world->counters().bytes_of(Collective::all_gather), 12);
  EXPECT_EQ(world->counters().calls_of(Collective::reduce_scatter), 0) << "younger than the gather: still pending";
  ASSERT_TRUE(world->finish_started().ok());
  EXPECT_EQ(gathered, unit);
  EXPECT_EQ(world->counters().calls_of(Collective::all_gather), 2);
  const Status bad = world->start_all_gather(unit.data(), unit.data() + 1, 2, DataType::f32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("all_gather on 'world'"), std::string::npos) << bad.error().message;
  EXPECT_EQ(world->started_calls(), 0u);
}

TEST(LocalCommunicator, SplitMakesANamedGroupWithCountersOfItsOwn) {
  auto world = make_local_communicator();
  std::vector<float> x(4, 1.0f);
  ASSERT_TRUE(succeeded(world->all_reduce(x.data(), x.data(), 4, ReduceOp::sum)));

  auto dp = world->split(0, 0, "dp");
  ASSERT_TRUE(dp);
  EXPECT_EQ((*dp)->name(), "dp");
  EXPECT_EQ((*dp)->size(), 1);
  EXPECT_EQ((*dp)->counters().calls_of(Collective::all_reduce), 0);
  ASSERT_TRUE(succeeded((*dp)->all_reduce(x.data(), x.data(), 2, ReduceOp::sum)));
  EXPECT_EQ((*dp)->counters().bytes_of(Collective::all_reduce), 8);
  EXPECT_EQ(world->counters().bytes_of(Collective::all_reduce), 16);

  auto unnamed = world->split(3, 7);
  ASSERT_TRUE(unnamed);
  EXPECT_EQ((*unnamed)->name(), "world/3");

  auto negative = world->split(-1, 0);
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().message, "split on 'world' (rank 0 of 1, world rank 0): color -1 is negative; every rank needs a group");
}

// What NCCL's unique id travels as (nccl.h): 128 opaque bytes, or any odd length.
TEST(LocalCommunicator, BroadcastBytesDeliversThemUnchangedAsOneBroadcast) {
  auto world = make_local_communicator();
  for (size_t n : {size_t{128}, size_t{7}}) {
    std::vector<unsigned char> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(255 - 3 * i);  // NaN patterns included, as 16-bit floats
    const std::vector<unsigned char> sent = bytes;
    ASSERT_TRUE(succeeded(broadcast_bytes(*world, bytes.data(), n, 0)));
    EXPECT_EQ(bytes, sent);
  }
  EXPECT_EQ(world->counters().calls_of(Collective::broadcast), 2);
  EXPECT_EQ(world->counters().bytes_of(Collective::broadcast), 128 + 8) << "odd lengths pad to whole 16-bit elements";
}

TEST(ReduceInRankOrder, SumsLeftToRightInRankOrder) {
  // Four ranks' copies of one element. In float, 1e8 + 1 rounds back to 1e8
  // (the spacing of floats near 1e8 is 8), so the order decides the result:
  // ((1e8 + 1) + -1e8) + 1 = 1, whereas summing from the last rank down gives 0.
  const std::vector<float> slices{1.0e8f, 1.0f, -1.0e8f, 1.0f};
  float out = -7.0f;
  reduce_in_rank_order(&out, slices.data(), 4, 1, DataType::f32, ReduceOp::sum);
  EXPECT_EQ(out, 1.0f);

  // (2, 3): two ranks, three elements each.
  const std::vector<double> two_ranks{1.0, 2.0, 3.0, 10.0, 20.0, 30.0};
  std::vector<double> sums(3);
  reduce_in_rank_order(sums.data(), two_ranks.data(), 2, 3, DataType::f64, ReduceOp::sum);
  EXPECT_EQ(sums, (std::vector<double>{11.0, 22.0, 33.0}));
}

// 16-bit sums are added in fp32 and rounded once: 256 + 1 + 1 in bf16 steps
// would round 257 back to 256 twice (bf16 has 8 significant bits), in fp32 it is 258.
TEST(ReduceInRankOrder, SixteenBitSumsAreWidenedAndRoundedOnce) {
  const std::vector<bf16> slices{to_bf16(256.0f), to_bf16(1.0f), to_bf16(1.0f)};
  bf16 out{};
  reduce_in_rank_order(&out, slices.data(), 3, 1, DataType::bf16, ReduceOp::sum);
  EXPECT_EQ(to_float(out), 258.0f);
  const std::vector<fp16> halves{to_fp16(2048.0f), to_fp16(1.0f), to_fp16(1.0f)};  // fp16: 11 significant bits
  fp16 half{};
  reduce_in_rank_order(&half, halves.data(), 3, 1, DataType::f16, ReduceOp::sum);
  EXPECT_EQ(to_float(half), 2050.0f);
  EXPECT_EQ(element_bytes(DataType::bf16), 2u);
}

TEST(ReduceInRankOrder, MaxIsTheLargestAndNaNWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // (3, 4): rank 1 holds a NaN in element 1, rank 0 one in element 2.
  const std::vector<float> slices{1.0f, 5.0f, nan, -3.0f,
                                  4.0f, nan, 2.0f, -1.0f,
                                  2.0f, 7.0f, 9.0f, -2.0f};
  std::vector<float> out(4);
  reduce_in_rank_order(out.data(), slices.data(), 3, 4, DataType::f32, ReduceOp::max);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], -1.0f);

  const std::vector<double> one_rank{-0.5};
  double single = 0.0;
  reduce_in_rank_order(&single, one_rank.data(), 1, 1, DataType::f64, ReduceOp::max);
  EXPECT_EQ(single, -0.5);
}

}  // namespace
}  // namespace tessera::engine::comm
