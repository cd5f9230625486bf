// The NCCL backend's rank-order all-reduce and reduce-scatter (nccl.h) run on
// the CPU for every rank of a simulated group: the transfers each rank would
// make (chunk_exchange, chunk_gather) are carried out between host buffers,
// every send matched with the receive its peer makes for it, and the result
// must be the rank-order reduction, bit for bit, on every rank. This is the
// algorithm a GPU runs, without NCCL: a send without its matching receive
// (of the same count) would hang there.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tessera/engine/comm/chunk_layout.h"
#include "tessera/engine/comm/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

using Buffers = std::vector<std::vector<float>>;  // one per rank

// Carries out every rank's `plan(rank)` from its `from` buffer into its
// peers' `to` buffers, checking that each send meets a receive of its size.
template <typename Plan>
void run_transfers(Plan plan, const Buffers& from, Buffers& to, const std::string& what) {
  const int n = static_cast<int>(from.size());
  for (int sender = 0; sender < n; ++sender) {
    for (const PeerTransfer& send : plan(sender)) {
      ASSERT_NE(send.peer, sender) << what;
      int matched = 0;
      for (const PeerTransfer& recv : plan(send.peer)) {
        if (recv.peer != sender) continue;
        ++matched;
        ASSERT_EQ(recv.recv_count, send.send_count) << what << ": rank " << sender << " to rank " << send.peer;
        std::memcpy(to[static_cast<size_t>(send.peer)].data() + recv.recv_offset, from[static_cast<size_t>(sender)].data() + send.send_offset,
                    send.send_count * sizeof(float));
      }
      ASSERT_EQ(matched, 1) << what << ": rank " << send.peer << " makes one transfer with rank " << sender;
    }
  }
}

Buffers inputs(int n, size_t count) {
  Buffers x(static_cast<size_t>(n), std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) x[static_cast<size_t>(r)][i] = (r % 2 == 0 ? 1.0e8f : 1.0f) * ((i + static_cast<size_t>(r)) % 3 == 0 ? -1.0f : 1.0f) + 0.1f * static_cast<float>(i);
  }
  return x;
}

// The rank-order sum of whole buffers, as reduce_in_rank_order defines it.
std::vector<float> rank_order_sum(const Buffers& x) {
  std::vector<float> slices, sum(x[0].size());
  for (const auto& rank : x) slices.insert(slices.end(), rank.begin(), rank.end());
  reduce_in_rank_order(sum.data(), slices.data(), static_cast<int>(x.size()), sum.size(), DataType::f32, ReduceOp::sum);
  return sum;
}

// Every rank: its own chunk copied into its scratch slot, the exchange, the reduction into `out` at `out_offset`.
void exchange_and_reduce(const ChunkLayout<size_t>& chunks, const Buffers& x, Buffers& out, bool at_chunk_offset, const std::string& what) {
  const int n = static_cast<int>(x.size());
  Buffers scratch(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const size_t mine = chunks.counts[static_cast<size_t>(r)];
    scratch[static_cast<size_t>(r)].assign(mine * static_cast<size_t>(n), 0.0f);
    std::memcpy(scratch[static_cast<size_t>(r)].data() + static_cast<size_t>(r) * mine, x[static_cast<size_t>(r)].data() + chunks.offsets[static_cast<size_t>(r)],
                mine * sizeof(float));
  }
  run_transfers([&](int r) { return chunk_exchange(chunks, r); }, x, scratch, what + " exchange");
  for (int r = 0; r < n; ++r) {
    const auto me = static_cast<size_t>(r);
    float* target = out[me].data() + (at_chunk_offset ? chunks.offsets[me] : 0);
    reduce_in_rank_order(target, scratch[me].data(), n, chunks.counts[me], DataType::f32, ReduceOp::sum);
  }
}

TEST(ChunkExchange, AllReduceGivesEveryRankTheRankOrderSum) {
  for (int n : {1, 2, 3, 5, 8}) {
    for (size_t count : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}}) {  // fewer elements than ranks: empty chunks
      const std::string what = std::to_string(n) + " ranks, " + std::to_string(count) + " elements";
      const Buffers x = inputs(n, count);
      const auto chunks = balanced_chunks<size_t>(count, n);
      Buffers out(static_cast<size_t>(n), std::vector<float>(count, -1.0f));
      exchange_and_reduce(chunks, x, out, true, what);
      const Buffers reduced = out;  // each rank's reduced chunk, sent from its output buffer
      run_transfers([&](int r) { return chunk_gather(chunks, r); }, reduced, out, what + " gather");
      const std::vector<float> want = rank_order_sum(x);
      for (int r = 0; r < n; ++r) EXPECT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), want.data(), count * sizeof(float)), 0) << what << ", rank " << r;
    }
  }
}

TEST(ChunkExchange, ReduceScatterGivesEachRankItsChunkOfTheRankOrderSum) {
  for (int n : {1, 2, 3, 5}) {
    const size_t recv_count = 257;
    const std::string what = std::to_string(n) + " ranks";
    const Buffers x = inputs(n, recv_count * static_cast<size_t>(n));
    Buffers out(static_cast<size_t>(n), std::vector<float>(recv_count, -1.0f));
    exchange_and_reduce(equal_chunks<size_t>(recv_count, n), x, out, false, what);
    const std::vector<float> want = rank_order_sum(x);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), want.data() + static_cast<size_t>(r) * recv_count, recv_count * sizeof(float)), 0)
          << what << ", rank " << r;
    }
  }
}

}  // namespace
}  // namespace tessera::engine::comm
