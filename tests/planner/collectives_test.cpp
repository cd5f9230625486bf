// NCCL's collective cost model (collectives.h).
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/planner/collectives.h"

namespace tessera::planner {
namespace {

// A DGX A100's NVLink (300 GB/s per direction) and 200 Gbit/s HDR InfiniBand per GPU.
CollectiveGroup group(int64_t ranks, int64_t nodes) { return CollectiveGroup{ranks, nodes, 300e9, 25e9, true}; }

TEST(Collectives, ALargeAllReduceInANodeIsARingAtTheLinkRate) {
  // Ring, Simple: 8.4 µs + 14 steps × 3.4 µs, then 2·7/8 of the bytes at 300 GB/s.
  const double bytes = 1e9;
  EXPECT_NEAR(collective_seconds(Collective::all_reduce, bytes, group(8, 1)), (8.4 + 14 * 3.4) * 1e-6 + 2 * 7.0 / 8 * bytes / 300e9, 1e-9);
  EXPECT_NEAR(collective_seconds(Collective::reduce_scatter, bytes, group(8, 1)), (8.4 + 7 * 3.4) * 1e-6 + 7.0 / 8 * bytes / 300e9, 1e-9);
}

TEST(Collectives, ASmallMessageTakesTheLowLatencyProtocol) {
  // 4 KiB: LL's 6.6 + 14 × 0.6 µs beats Simple's 8.4 + 14 × 3.4 µs at half the bandwidth.
  EXPECT_NEAR(collective_seconds(Collective::all_reduce, 4096, group(8, 1)), (6.6 + 14 * 0.6) * 1e-6 + 2 * 7.0 / 8 * 4096 / 150e9, 1e-12);
}

TEST(Collectives, ThousandsOfRanksUseTheTreeForMidSizedAllReduces) {
  // 1024 nodes of 8: a ring pays 2·8191 hops (2·1023 of them across the network, 14 µs
  // each), a tree 2·(7 in-node hops + log2(1024) = 10 network hops); both move the
  // bytes over a node's 8 NICs together, 8 × 25 GB/s.
  const CollectiveGroup big = group(8192, 1024);
  const double bytes = 64e6;
  const double tree = (8.4 + 2 * (7 * 4.0 + 10 * 14.0)) * 1e-6 + bytes / (0.5 * 0.92 * 200e9);
  EXPECT_NEAR(collective_seconds(Collective::all_reduce, bytes, big), tree, 1e-9);
  // The ring alone would take 2·1023 network hops of 14 µs: about 29 ms more.
  const double ring_latency = (8.4 + (2 * 8191 - 2 * 1023) * 3.4 + 2 * 1023 * 14.0) * 1e-6;
  EXPECT_GT(ring_latency, 0.05);
  EXPECT_LT(collective_seconds(Collective::all_reduce, bytes, big), 0.5 * (ring_latency + 2 * bytes / 25e9));
}

TEST(Collectives, AcrossNodesEachRankOnANodeAddsItsNic) {
  // A 1 GB reduce-scatter over 4 nodes, Simple protocol: n − 1 steps, (n−1)/n of the bytes
  // at the bus bandwidth. One rank per node: its own NIC, 25 GB/s, every hop a network hop.
  const double bytes = 1e9;
  EXPECT_NEAR(collective_seconds(Collective::reduce_scatter, bytes, group(4, 4)), (8.4 + 3 * 14.0) * 1e-6 + 3.0 / 4 * bytes / 25e9, 1e-9);
  // Eight ranks per node: one ring channel per NIC, a node's 8 × 25 GB/s together.
  EXPECT_NEAR(collective_seconds(Collective::reduce_scatter, bytes, group(32, 4)),
              (8.4 + 28 * 3.4 + 3 * 14.0) * 1e-6 + 31.0 / 32 * bytes / 200e9, 1e-9);
  // Never faster than the NVLink the ring also runs through: 16 NICs of 25 GB/s, 300 GB/s.
  EXPECT_NEAR(collective_seconds(Collective::reduce_scatter, bytes, group(64, 4)),
              (8.4 + 60 * 3.4 + 3 * 14.0) * 1e-6 + 63.0 / 64 * bytes / 300e9, 1e-9);
}

TEST(Collectives, BusBandwidthRisesWithTheMessageAndSaturatesAtTheLink) {
  // nccl-tests' curve: busbw = algbw · 2(n−1)/n climbs with the size toward the link rate.
  double previous = 0;
  for (double bytes : {1e3, 1e5, 1e7, 1e9, 1e11}) {
    const double busbw = bus_bandwidth(Collective::all_reduce, bytes, group(8, 1));
    EXPECT_GT(busbw, previous) << bytes;
    previous = busbw;
  }
  EXPECT_LT(bus_bandwidth(Collective::all_reduce, 1e6, group(8, 1)), 0.5 * 300e9);
  EXPECT_NEAR(previous, 300e9, 0.01 * 300e9);
  EXPECT_EQ(collective_seconds(Collective::all_gather, 1e9, group(1, 1)), 0.0);
}

}  // namespace
}  // namespace tessera::planner
