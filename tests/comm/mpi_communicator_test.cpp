// The MPI communicator on real ranks: run as `mpirun -np N tessera_mpi_communicator_test`
// (ctest runs N = 2 and 4). A plain program rather than gtest: every rank must
// make the same collective calls whatever fails, so checks record failures and
// carry on, and the ranks agree on the verdict at the end (exit 0 or 1 on
// every rank). Each check prints "rank R: FAILED ..." with its line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "../support/rank_checker.h"
#include "tessera/engine/comm/mpi.h"

namespace tessera::engine::comm {
namespace {

using Checker = tessera::testing::RankChecker;

bool same_bits(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

// Rank-dependent data whose float sum depends on the order of the ranks:
// large values of alternating sign on even ranks, small ones on odd ranks.
float contribution(int rank, size_t i) {
  const float sign = (i + static_cast<size_t>(rank)) % 3 == 0 ? -1.0f : 1.0f;
  const float magnitude = rank % 2 == 0 ? 1.0e8f : 1.0f;
  return sign * magnitude + 0.1f * static_cast<float>(i) + 0.01f * static_cast<float>(rank);
}

// The sum the interface promises: left to right in rank order.
std::vector<float> rank_order_sum(int size, size_t count) {
  std::vector<float> sum(count);
  for (size_t i = 0; i < count; ++i) {
    sum[i] = contribution(0, i);
    for (int r = 1; r < size; ++r) sum[i] += contribution(r, i);
  }
  return sum;
}

std::vector<float> contributions(int rank, size_t count) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = contribution(rank, i);
  return x;
}

void check_all_reduce(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  // Counts below, equal to and above the rank count: some ranks own empty chunks.
  for (size_t count : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}}) {
    const std::vector<float> x = contributions(r, count);
    std::vector<float> sum(count, -1.0f);
    check.expect_ok(world.all_reduce(x.data(), sum.data(), count, ReduceOp::sum), "all_reduce sum");
    const std::vector<float> expected = rank_order_sum(n, count);
    check.expect(same_bits(sum.data(), expected.data(), count * sizeof(float)),
                 "all_reduce sum of " + std::to_string(count) + " floats is the rank-order sum, bit for bit");

    // Every rank holds the same bits: gather everybody's result and compare.
    std::vector<float> everyone(count * static_cast<size_t>(n));
    check.expect_ok(world.all_gather(sum.data(), everyone.data(), count), "all_gather of the sums");
    for (int q = 0; q < n; ++q) {
      check.expect(same_bits(everyone.data() + static_cast<size_t>(q) * count, sum.data(), count * sizeof(float)),
                   "rank " + std::to_string(q) + " has the same all_reduce result");
    }
  }

  std::vector<double> in_place{1.0 * r, 2.0 * r, 3.0};
  check.expect_ok(world.all_reduce(in_place.data(), in_place.data(), 3, ReduceOp::sum), "in-place all_reduce");
  const double ranks_sum = n * (n - 1) / 2.0;
  check.expect(in_place[0] == ranks_sum && in_place[1] == 2 * ranks_sum && in_place[2] == 3.0 * n, "in-place all_reduce of doubles");

  // max: rank r contributes 10r + i; the last rank holds a NaN in element 2.
  std::vector<float> values(4), maxima(4);
  for (size_t i = 0; i < 4; ++i) values[i] = 10.0f * static_cast<float>(r) + static_cast<float>(i);
  if (r == n - 1) values[2] = std::numeric_limits<float>::quiet_NaN();
  check.expect_ok(world.all_reduce(values.data(), maxima.data(), 4, ReduceOp::max), "all_reduce max");
  check.expect(maxima[0] == 10.0f * static_cast<float>(n - 1) && maxima[3] == 10.0f * static_cast<float>(n - 1) + 3.0f, "all_reduce max values");
  check.expect(std::isnan(maxima[2]), "all_reduce max propagates a NaN from one rank");
}

// Several started all-reduces in flight at once (DDP's buckets): each result
// is the rank-order sum, bit for bit as the blocking call's; a rank that
// computes between the starts (rank 0 sleeps) changes nothing; counters count
// each call once it completes; a blocking call is refused while calls are pending.
void check_started_all_reduces(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const std::vector<size_t> counts{1000, 3, 200000, 7};  // 800 KB: past the eager limit
  std::vector<std::vector<float>> buffers;
  for (size_t count : counts) buffers.push_back(contributions(r, count));
  const CommCounters before = world.counters();
  for (auto& buffer : buffers) {
    check.expect_ok(world.start_all_reduce(buffer.data(), buffer.data(), buffer.size(), ReduceOp::sum), "start_all_reduce");
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    check.expect_ok(world.progress(), "progress");
  }
  // Only where calls are still pending (progress may have completed them all):
  // refused before any communication, so ranks that skip it stay in step.
  if (world.started_calls() > 0) {
    const Status refused = world.barrier();
    check.expect(!refused.ok() && refused.error().code == ErrorCode::invalid_argument &&
                     refused.error().message.find("call finish_started() first") != std::string::npos,
                 "a blocking call while started calls are pending is refused: " + (refused.ok() ? std::string("(accepted)") : refused.error().message));
  }
  check.expect_ok(world.finish_started(), "finish_started");
  check.expect(world.started_calls() == 0, "no call pending after finish_started");
  for (size_t k = 0; k < counts.size(); ++k) {
    const std::vector<float> expected = rank_order_sum(n, counts[k]);
    check.expect(same_bits(buffers[k].data(), expected.data(), counts[k] * sizeof(float)),
                 "started all_reduce of " + std::to_string(counts[k]) + " floats is the rank-order sum, bit for bit");
  }
  const CommCounters d = world.counters().since(before);
  size_t payload = 0;
  for (size_t count : counts) payload += count * sizeof(float);
  check.expect(d.calls_of(Collective::all_reduce) == 4 && d.bytes_of(Collective::all_reduce) == static_cast<int64_t>(payload),
               "four started all-reduces counted with their payload");
  check.expect(d.in_flight_seconds_of(Collective::all_reduce) >= d.seconds_of(Collective::all_reduce) && d.seconds_of(Collective::all_reduce) > 0,
               "a started call is in flight at least as long as this rank waited in it");
}

void check_reduce_scatter(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const size_t per_rank = 5, total = per_rank * static_cast<size_t>(n);
  const std::vector<float> x = contributions(r, total);
  const std::vector<float> expected = rank_order_sum(n, total);
  std::vector<float> mine(per_rank, -1.0f);
  check.expect_ok(world.reduce_scatter(x.data(), mine.data(), per_rank, ReduceOp::sum), "reduce_scatter");
  check.expect(same_bits(mine.data(), expected.data() + static_cast<size_t>(r) * per_rank, per_rank * sizeof(float)),
               "reduce_scatter gives rank r elements [5r, 5r + 5) of the rank-order sum");

  // In place: the result lands on this rank's own chunk of the input.
  std::vector<float> buffer = contributions(r, total);
  float* own_chunk = buffer.data() + static_cast<size_t>(r) * per_rank;
  check.expect_ok(world.reduce_scatter(buffer.data(), own_chunk, per_rank, ReduceOp::sum), "in-place reduce_scatter");
  check.expect(same_bits(own_chunk, mine.data(), per_rank * sizeof(float)), "in-place reduce_scatter equals out of place");
}

// Uneven counts, rank 0's 0: rank r > 0 gets r + 1 elements of the
// rank-order sum, after those of the ranks before it; in place it lands where
// its part of the input starts.
void check_reduce_scatter_v(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  std::vector<size_t> counts(static_cast<size_t>(n));
  size_t total = 0, before = 0;
  for (int q = 0; q < n; ++q) {
    counts[static_cast<size_t>(q)] = static_cast<size_t>(q == 0 ? 0 : q + 1);
    if (q == r) before = total;
    total += counts[static_cast<size_t>(q)];
  }
  const std::vector<float> expected = rank_order_sum(n, total);
  const size_t mine = counts[static_cast<size_t>(r)];
  std::vector<float> out(std::max<size_t>(mine, 1), -1.0f);
  const std::vector<float> x = contributions(r, total);
  check.expect_ok(world.reduce_scatter_v(x.data(), out.data(), counts, comm::DataType::f32, ReduceOp::sum), "reduce_scatter_v");
  check.expect(same_bits(out.data(), expected.data() + before, mine * sizeof(float)), "reduce_scatter_v gives rank r its counts[r] elements of the sum");
  std::vector<float> buffer = contributions(r, total);
  check.expect_ok(world.reduce_scatter_v(buffer.data(), buffer.data() + before, counts, comm::DataType::f32, ReduceOp::sum), "in-place reduce_scatter_v");
  check.expect(same_bits(buffer.data() + before, expected.data() + before, mine * sizeof(float)), "in-place reduce_scatter_v equals out of place");
  const std::vector<size_t> short_counts(static_cast<size_t>(n) + 1, 1);
  check.expect(!world.reduce_scatter_v(x.data(), out.data(), short_counts, comm::DataType::f32, ReduceOp::sum).ok(),
               "reduce_scatter_v refuses a count list that is not one per rank");
}

// Started reduce_scatter_v calls in flight together (ZeRO's two overlapped
// buckets): each rank's part is the blocking call's, bit for bit, also in
// place and where a rank's part is empty; finish_oldest completes the older
// calls only, and each is counted as a reduce_scatter of its whole input.
void check_started_reduce_scatters(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const std::vector<std::vector<size_t>> layouts{
      std::vector<size_t>(static_cast<size_t>(n), 100000),  // 400 KB per rank: past the eager limit
      [n] {
        std::vector<size_t> uneven(static_cast<size_t>(n), 0);
        uneven.back() = 7;  // only the last rank receives
        return uneven;
      }(),
      std::vector<size_t>(static_cast<size_t>(n), 3)};
  std::vector<std::vector<float>> buffers;
  std::vector<size_t> before_mine;
  for (const std::vector<size_t>& counts : layouts) {
    size_t total = 0, before = 0;
    for (int q = 0; q < n; ++q) {
      if (q == r) before = total;
      total += counts[static_cast<size_t>(q)];
    }
    buffers.push_back(contributions(r, total));
    before_mine.push_back(before);
  }
  const CommCounters start = world.counters();
  for (size_t k = 0; k < layouts.size(); ++k) {
    float* in_place = buffers[k].data() + before_mine[k];
    check.expect_ok(world.start_reduce_scatter_v(buffers[k].data(), in_place, layouts[k], comm::DataType::f32, ReduceOp::sum), "start_reduce_scatter_v");
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    check.expect_ok(world.progress(), "progress");
  }
  check.expect_ok(world.finish_oldest(1), "finish_oldest(1)");
  check.expect(world.started_calls() <= 2, "finish_oldest(1) completes the oldest call");
  check.expect_ok(world.finish_started(), "finish_started");
  for (size_t k = 0; k < layouts.size(); ++k) {
    const size_t total = buffers[k].size(), mine = layouts[k][static_cast<size_t>(r)];
    const std::vector<float> expected = rank_order_sum(n, total);
    check.expect(same_bits(buffers[k].data() + before_mine[k], expected.data() + before_mine[k], mine * sizeof(float)),
                 "started reduce_scatter_v " + std::to_string(k) + " gives this rank its part of the rank-order sum, bit for bit");
  }
  const CommCounters d = world.counters().since(start);
  int64_t payload = 0;
  for (const auto& buffer : buffers) payload += static_cast<int64_t>(buffer.size() * sizeof(float));
  check.expect(d.calls_of(Collective::reduce_scatter) == 3 && d.bytes_of(Collective::reduce_scatter) == payload,
               "three started reduce-scatters counted with their whole inputs");
}

void check_all_gather(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const size_t per_rank = 3;
  std::vector<double> mine(per_rank), all(per_rank * static_cast<size_t>(n), -1.0);
  for (size_t k = 0; k < per_rank; ++k) mine[k] = 100.0 * r + static_cast<double>(k);
  check.expect_ok(world.all_gather(mine.data(), all.data(), per_rank), "all_gather");
  bool ordered = true;
  for (int q = 0; q < n; ++q) {
    for (size_t k = 0; k < per_rank; ++k) ordered &= all[static_cast<size_t>(q) * per_rank + k] == 100.0 * q + static_cast<double>(k);
  }
  check.expect(ordered, "all_gather puts rank q's elements at [3q, 3q + 3)");

  std::vector<double> in_place(per_rank * static_cast<size_t>(n), -1.0);
  std::copy(mine.begin(), mine.end(), in_place.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * per_rank));
  check.expect_ok(world.all_gather(in_place.data() + static_cast<size_t>(r) * per_rank, in_place.data(), per_rank), "in-place all_gather");
  check.expect(in_place == all, "in-place all_gather equals out of place");
}

void check_broadcast(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const int root = n - 1;  // not rank 0
  std::vector<float> source(6), received(6, -1.0f);
  for (size_t i = 0; i < source.size(); ++i) source[i] = r == root ? 42.0f + static_cast<float>(i) : -5.0f;
  check.expect_ok(world.broadcast(r == root ? source.data() : nullptr, received.data(), 6, root), "broadcast from the last rank");
  bool from_root = true;
  for (size_t i = 0; i < received.size(); ++i) from_root &= received[i] == 42.0f + static_cast<float>(i);
  check.expect(from_root, "broadcast delivers the root's data to every rank");

  check.expect_ok(world.broadcast(source.data(), source.data(), 6, root), "in-place broadcast");
  check.expect(source == received, "in-place broadcast equals out of place");

  // How NCCL's unique id reaches every rank (nccl.h): 128 opaque bytes, unchanged.
  std::vector<unsigned char> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = r == root ? static_cast<unsigned char>(255 - 3 * i) : 0;
  check.expect_ok(broadcast_bytes(world, id.data(), id.size(), root), "broadcast_bytes");
  bool same = true;
  for (size_t i = 0; i < id.size(); ++i) same &= id[i] == static_cast<unsigned char>(255 - 3 * i);
  check.expect(same, "broadcast_bytes delivers the root's bytes unchanged (NaN patterns as 16-bit elements included)");
}

// Each rank sends to the next and receives from the previous. Even ranks send
// first and odd ranks receive first, so blocking sends of a message too large
// for MPI's eager protocol cannot all wait at once.
void check_ring(Communicator& group, Checker& check, size_t count) {
  const int n = group.size(), r = group.rank();
  if (n < 2) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  std::vector<float> outgoing(count), incoming(count, -1.0f);
  for (size_t i = 0; i < count; ++i) outgoing[i] = 1000.0f * static_cast<float>(r) + static_cast<float>(i % 1000);
  if (r % 2 == 0) {
    check.expect_ok(group.send(outgoing.data(), count, next), "ring send");
    check.expect_ok(group.recv(incoming.data(), count, previous), "ring recv");
  } else {
    check.expect_ok(group.recv(incoming.data(), count, previous), "ring recv");
    check.expect_ok(group.send(outgoing.data(), count, next), "ring send");
  }
  bool from_previous = true;
  for (size_t i = 0; i < count; ++i) from_previous &= incoming[i] == 1000.0f * static_cast<float>(previous) + static_cast<float>(i % 1000);
  check.expect(from_previous, "ring recv of " + std::to_string(count) + " floats holds the previous rank's data");
}

// Started sends (a pipeline stage's): every rank starts two large sends to the
// next rank, one per tag, before receiving anything, so blocking sends past
// the eager limit would all wait; the receiver takes them in the other tag
// order, and a collective runs while they are pending. Both arrive whole, by
// tag; finish_send(buffer) frees the buffer; the counters count both.
void check_started_sends(Communicator& group, Checker& check, size_t count) {
  const int n = group.size(), r = group.rank();
  if (n < 2) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  const CommCounters before = group.counters();
  std::vector<float> activations(count, static_cast<float>(r)), gradients(count, static_cast<float>(100 + r));
  std::vector<float> got_activations(count, -1.0f), got_gradients(count, -1.0f);
  check.expect_ok(group.start_send(activations.data(), count, next, 0), "start_send, tag 0");
  check.expect_ok(group.start_send(gradients.data(), count, next, 1), "start_send, tag 1");
  check.expect(group.started_sends() == 2, "two sends are pending");
  double one = 1;
  check.expect_ok(group.all_reduce(&one, &one, 1, ReduceOp::sum), "an all_reduce while sends are pending");
  check.expect_ok(group.recv(got_gradients.data(), count, previous, 1), "recv, tag 1");
  check.expect_ok(group.recv(got_activations.data(), count, previous, 0), "recv, tag 0");
  check.expect_ok(group.finish_send(activations.data()), "finish_send");
  check.expect(group.started_sends() == 1, "finish_send completes the send that read its buffer only");
  check.expect_ok(group.finish_sends(), "finish_sends");
  check.expect(got_activations == std::vector<float>(count, static_cast<float>(previous)) &&
                   got_gradients == std::vector<float>(count, static_cast<float>(100 + previous)),
               "each recv takes the message of its tag");
  const CommCounters moved = group.counters().since(before);
  check.expect(moved.calls_of(Collective::send) == 2 && moved.bytes_of(Collective::send) == static_cast<int64_t>(2 * count * 4),
               "started sends are counted when they complete");
}

// Started send_recvs (the sequence-parallel chunks'): every rank starts a
// large one (to the next rank, from the previous) and runs a collective
// meanwhile; finish_recv hands the buffer back whole and counts a send and a
// recv; a message shorter than the started recv fails at finish_recv.
void check_started_send_recvs(Communicator& group, Checker& check, size_t count) {
  const int n = group.size(), r = group.rank();
  if (n < 2) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  const CommCounters before = group.counters();
  std::vector<float> mine(count, static_cast<float>(r)), got(count, -1.0f);
  check.expect_ok(group.start_send_recv(mine.data(), next, got.data(), previous, count), "start_send_recv");
  double one = 1;
  check.expect_ok(group.all_reduce(&one, &one, 1, ReduceOp::sum), "an all_reduce while a send_recv is pending");
  check.expect_ok(group.finish_recv(got.data()), "finish_recv");
  check.expect(group.started_sends() == 0, "finish_recv completes both halves");
  check.expect(got == std::vector<float>(count, static_cast<float>(previous)), "the started recv holds the previous rank's message");
  const CommCounters moved = group.counters().since(before);
  check.expect(moved.calls_of(Collective::recv) == 1 && moved.calls_of(Collective::send) == 1 &&
                   moved.bytes_of(Collective::recv) == static_cast<int64_t>(count * 4),
               "a started send_recv is counted as a send and a recv when it completes");
  // A 2-float message ahead of the 4-float one (small: both sends complete eagerly).
  check.expect_ok(group.start_send(mine.data(), 2, next), "start_send of 2 floats");
  check.expect_ok(group.start_send_recv(mine.data() + 2, next, got.data(), previous, 4), "start_send_recv of 4 floats");
  const Status short_message = group.finish_recv(got.data());
  check.expect(!short_message.ok() && short_message.error().message.find(std::to_string(previous) + " sent 2 elements") != std::string::npos,
               "a shorter message than the started recv fails at finish_recv: " + (short_message.ok() ? std::string("(none)") : short_message.error().message));
  check.expect_ok(group.recv(got.data(), 4, previous), "the 4 floats, taken");
}

// send_recv (a GPU pipeline stage's calls, parallel/pipeline_transfers.h):
// every rank sends a large message to the next rank and receives one from the
// previous in one call, so a send that waited for its recv first would wait
// forever; then the two directions between neighbours at once (an activation
// on, a gradient back), and a call with its send half only. Counted as sends and recvs.
void check_send_recv(Communicator& group, Checker& check, size_t count) {
  const int n = group.size(), r = group.rank();
  if (n < 2) return;
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  const CommCounters before = group.counters();
  std::vector<float> outgoing(count, static_cast<float>(r)), incoming(count, -1.0f);
  check.expect_ok(group.send_recv(outgoing.data(), next, incoming.data(), previous, count), "send_recv around the ring");
  check.expect(incoming == std::vector<float>(count, static_cast<float>(previous)), "send_recv receives the previous rank's message");
  // Pairs (0, 1), (2, 3), ...: each sends to and receives from its partner in one call.
  const int partner = r % 2 == 0 ? r + 1 : r - 1;
  if (partner < n) {
    check.expect_ok(group.send_recv(outgoing.data(), partner, incoming.data(), partner, count), "send_recv with one partner both ways");
    check.expect(incoming == std::vector<float>(count, static_cast<float>(partner)), "send_recv exchanges with the partner");
  }
  if (r == 0) check.expect_ok(group.send_recv(outgoing.data(), 1, static_cast<float*>(nullptr), -1, count), "send_recv, its send half only");
  if (r == 1) check.expect_ok(group.send_recv(static_cast<const float*>(nullptr), -1, incoming.data(), 0, count), "send_recv, its recv half only");
  const int64_t pairs = partner < n ? 1 : 0, halves = (r == 0 || r == 1) ? 1 : 0;
  const CommCounters moved = group.counters().since(before);
  check.expect(moved.calls_of(Collective::send) == 1 + pairs + (r == 0 ? 1 : 0) && moved.calls_of(Collective::recv) == 1 + pairs + (r == 1 ? 1 : 0) &&
                   moved.bytes_of(Collective::send) + moved.bytes_of(Collective::recv) == static_cast<int64_t>((2 + 2 * pairs + halves) * count * 4),
               "send_recv counts a send and a recv");
}

void check_split(Communicator& world, Checker& check) {
  const int n = world.size(), r = world.rank();
  const int color = r % 2;
  const int members = (n - color + 1) / 2;  // ranks color, color + 2, ...
  auto parity = world.split(color, r, color == 0 ? "even" : "odd");
  check.expect(parity.ok(), "split into even and odd ranks");
  if (!parity.ok()) return;
  Communicator& group = **parity;
  check.expect(group.size() == members && group.rank() == r / 2, "split orders the group by key");
  check.expect(group.name() == (color == 0 ? "even" : "odd") && group.world_rank() == r, "split names the group");

  double world_rank = r, sum = 0.0;
  check.expect_ok(group.all_reduce(&world_rank, &sum, 1, ReduceOp::sum), "all_reduce in the parity group");
  double expected_sum = 0.0;
  for (int q = color; q < n; q += 2) expected_sum += q;
  check.expect(sum == expected_sum, "all_reduce sums only the group's ranks");

  std::vector<double> ranks(static_cast<size_t>(members), -1.0);
  check.expect_ok(group.all_gather(&world_rank, ranks.data(), 1), "all_gather in the parity group");
  bool in_order = true;
  for (int k = 0; k < members; ++k) in_order &= ranks[static_cast<size_t>(k)] == color + 2.0 * k;
  check.expect(in_order, "all_gather in the group lists its world ranks in group order");

  double from_last = world_rank;
  check.expect_ok(group.broadcast(&from_last, &from_last, 1, members - 1), "broadcast in the parity group");
  check.expect(from_last == color + 2.0 * (members - 1), "broadcast from the group's last rank");
  check_ring(group, check, 16);

  // The new group counts its own calls; the parent does not see them.
  check.expect(group.counters().calls_of(Collective::all_reduce) == 1 && group.counters().bytes_of(Collective::all_reduce) == 8,
               "the group's counters start at zero");

  // A key that reverses the order.
  auto reversed = world.split(color, -r);
  check.expect(reversed.ok() && (*reversed)->rank() == members - 1 - r / 2, "split orders by key, not by rank");
  check.expect(reversed.ok() && (*reversed)->name() == "world/" + std::to_string(color), "an unnamed group is called parent/color");
}

// On a fresh world communicator, so that nothing else has been counted.
void check_counters(MpiRuntime& runtime, Checker& check) {
  auto fresh = runtime.world();
  check.expect(fresh.ok(), "a second world communicator");
  if (!fresh.ok()) return;
  Communicator& world = **fresh;
  const auto n = static_cast<int64_t>(world.size());
  std::vector<float> f(64, 1.0f), g(64);
  std::vector<double> d(64, 1.0), e(64);
  check.expect_ok(world.all_reduce(f.data(), g.data(), 10, ReduceOp::sum), "counted all_reduce");
  check.expect_ok(world.reduce_scatter(d.data(), e.data(), 3, ReduceOp::sum), "counted reduce_scatter");
  check.expect_ok(world.all_gather(f.data(), g.data(), 2), "counted all_gather");
  check.expect_ok(world.broadcast(d.data(), e.data(), 5, 0), "counted broadcast");
  check_ring(world, check, 4);
  check.expect_ok(world.barrier(), "counted barrier");

  const CommCounters& c = world.counters();
  check.expect(c.bytes_of(Collective::all_reduce) == 10 * 4, "all_reduce bytes = count · 4");
  check.expect(c.bytes_of(Collective::reduce_scatter) == n * 3 * 8, "reduce_scatter bytes = size · recv_count · 8");
  check.expect(c.bytes_of(Collective::all_gather) == n * 2 * 4, "all_gather bytes = size · send_count · 4");
  check.expect(c.bytes_of(Collective::broadcast) == 5 * 8, "broadcast bytes = count · 8");
  check.expect(c.bytes_of(Collective::send) == 16 && c.bytes_of(Collective::recv) == 16, "send and recv bytes = count · 4");
  check.expect(c.calls_of(Collective::barrier) == 1 && c.bytes_of(Collective::barrier) == 0, "a barrier is a call of 0 bytes");
  for (Collective kind : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather, Collective::broadcast}) {
    check.expect(c.calls_of(kind) == 1, std::string(enum_name(kind)) + " counted once");
  }
}

// A collective that rank 1 joins only after the others' timeout: their calls
// fail with comm_error and the one-line message of mpi.h; rank 1's late call
// then completes (the others' calls are still pending in MPI, so the job can
// finalise).
void check_timeout(MpiRuntime& runtime, Checker& check) {
  using Seconds = std::chrono::duration<double>;
  for (double refused : {0.0, -1.0, std::nan("")}) {
    const auto made = runtime.world(Seconds(refused));
    check.expect(!made.ok() && made.error().code == ErrorCode::invalid_argument, "a timeout of " + std::to_string(refused) + " s is refused");
  }
  auto made = runtime.world(Seconds(0.5));
  check.expect(made.ok(), "a world communicator with a timeout of 0.5 s");
  if (!made.ok()) return;
  Communicator& world = **made;
  const int n = world.size(), r = world.rank();
  const size_t per_rank = 256;  // 1 KiB of floats
  const std::vector<float> mine(per_rank, static_cast<float>(r));
  // MPI may write into a timed-out call's buffers later: they live to the end.
  static std::vector<float> all;
  all.resize(per_rank * static_cast<size_t>(n));
  if (r == 1) {
    std::this_thread::sleep_for(Seconds(1.5));
    check.expect_ok(world.all_gather(mine.data(), all.data(), per_rank), "the late rank's all_gather");
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const Status waited = world.all_gather(mine.data(), all.data(), per_rank);
  const Seconds elapsed = std::chrono::steady_clock::now() - start;
  const std::string expected = "all_gather on 'world' (rank " + std::to_string(r) + " of " + std::to_string(n) + ", world rank " +
                               std::to_string(r) + "): MPI_Iallgather of " + std::to_string(n) +
                               ".00 KiB did not complete within 0.5 s (--comm-timeout); another rank has died or is stuck, or did not make this call";
  check.expect(!waited.ok() && waited.error().code == ErrorCode::comm_error && waited.error().message == expected,
               "a collective rank 1 joins late fails after the timeout: " + (waited.ok() ? std::string("(succeeded)") : waited.error().message));
  check.expect(elapsed >= Seconds(0.5) && elapsed < Seconds(1.5), "the timeout expires after 0.5 s (took " + std::to_string(elapsed.count()) + " s)");
  check.expect(world.counters().calls_of(Collective::all_gather) == 0, "a call that timed out is not counted");
}

// Mismatches a rank can see become a Status, and the group stays usable.
void check_errors(Communicator& world, Checker& check) {
  const int r = world.rank();
  std::vector<float> buffer(8, 1.0f);

  // Rank 0 sends 8 floats where rank 1 expects 4: MPI reports a truncation.
  if (r == 0) check.expect_ok(world.send(buffer.data(), 8, 1), "send of 8 floats");
  if (r == 1) {
    const Status truncated = world.recv(buffer.data(), 4, 0);
    check.expect(!truncated.ok() && truncated.error().code == ErrorCode::comm_error, "a longer message than the recv fails with comm_error");
    check.expect(!truncated.ok() && truncated.error().message.find("recv on 'world' (rank 1 of") == 0 &&
                     truncated.error().message.find("MPI_Irecv failed: MPI_ERR_TRUNCATE") != std::string::npos,
                 "the truncation names the call, the group, the rank and MPI's error: " +
                     (truncated.ok() ? std::string("(none)") : truncated.error().message));
  }
  check.expect_ok(world.barrier(), "barrier after a truncated message");

  // Rank 0 sends 2 floats where rank 1 expects 4: a short message.
  if (r == 0) check.expect_ok(world.send(buffer.data(), 2, 1), "send of 2 floats");
  if (r == 1) {
    const Status short_message = world.recv(buffer.data(), 4, 0);
    check.expect(!short_message.ok() && short_message.error().message.find("rank 0 sent 2 elements, 4 were expected") != std::string::npos,
                 "a shorter message than the recv fails");
  }

  // Found before any communication, on every rank alike.
  const Status bad_root = world.broadcast(buffer.data(), buffer.data(), 4, world.size());
  check.expect(!bad_root.ok() && bad_root.error().code == ErrorCode::invalid_argument, "a root outside the group");
  check.expect(!world.send(buffer.data(), 4, r).ok(), "a send to oneself");

  double one = 1.0, total = 0.0;
  check.expect_ok(world.all_reduce(&one, &total, 1, ReduceOp::sum), "all_reduce after the errors");
  check.expect(total == world.size(), "the group still works after the errors");
}

int run(MpiRuntime& runtime) {
  auto world_result = runtime.world();
  if (!world_result.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", runtime.world_rank(), world_result.error().message.c_str());
    return 1;
  }
  Communicator& world = **world_result;
  Checker check(world.rank());
  check.expect(world.size() >= 2, "run under mpirun -np 2 or more");
  check.expect(world.size() == runtime.world_size() && world.rank() == runtime.world_rank() && world.name() == "world", "the world");
  check.expect(!MpiRuntime::start().ok(), "a second MpiRuntime in one process is refused");

  check_all_reduce(world, check);
  check_started_all_reduces(world, check);
  check_reduce_scatter(world, check);
  check_reduce_scatter_v(world, check);
  check_started_reduce_scatters(world, check);
  check_all_gather(world, check);
  check_broadcast(world, check);
  check_ring(world, check, 200000);  // 800 KB: past the eager limit of shared-memory transports
  check_started_sends(world, check, 200000);
  check_started_send_recvs(world, check, 200000);
  check_send_recv(world, check, 200000);
  check_split(world, check);
  check_timeout(runtime, check);
  check_counters(runtime, check);
  if (world.size() >= 2) check_errors(world, check);

  // Every rank exits with the same verdict.
  double failures = check.failures(), worst = 0.0;
  const Status agreed = world.all_reduce(&failures, &worst, 1, ReduceOp::max);
  if (!agreed.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), agreed.error().message.c_str());
    return 1;
  }
  if (world.rank() == 0) {
    if (worst == 0.0) std::printf("mpi_communicator_test: %d ranks, all checks passed\n", world.size());
    else std::printf("mpi_communicator_test: %d ranks, checks failed (see above)\n", world.size());
  }
  return worst == 0.0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::engine::comm

int main() {
  auto runtime = tessera::engine::comm::MpiRuntime::start();
  if (!runtime.ok()) {
    std::fprintf(stderr, "mpi_communicator_test: %s\n", runtime.error().message.c_str());
    return 1;
  }
  return tessera::engine::comm::run(**runtime);
}
