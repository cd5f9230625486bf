// The NCCL communicator (comm/nccl.h) with one rank on one GPU: every kind of
// call, against the one-rank local backend making the same calls on host
// buffers (the same results, bit for bit, and the same counters, which both
// take from Communicator: comm_types.h's payload per call). Without a device
// the GPU test skips with one line, and making an NCCL communicator is
// checked to fail in one line saying so. More ranks: nccl_ranks_gpu_test.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../kernels/kernel_check.h"
#include "device_buffer.h"
#include "tessera/engine/comm/local.h"
#include "tessera/engine/comm/nccl.h"

namespace tessera::engine::cuda::testing {
namespace {

using comm::Collective;
using comm::Communicator;
using comm::ReduceOp;
using kernels::testing::random_values;

// Host memory with DeviceBuffer's interface, for the local backend.
template <typename T>
class HostBuffer {
 public:
  explicit HostBuffer(size_t n) : data_(n) {}
  explicit HostBuffer(const std::vector<T>& host) : data_(host) {}
  T* get() { return data_.data(); }
  std::vector<T> host() const { return data_; }

 private:
  std::vector<T> data_;
};

struct Outcome {
  std::vector<std::vector<float>> f32;  // each call's output, in order
  std::vector<std::vector<bf16>> b16;
  comm::CommCounters world, dp;
  std::string refused_send;
};

void expect_ok(const Status& status) { EXPECT_TRUE(status.ok()) << (status.ok() ? "" : status.error().message); }

// One of every call, in place and not, on buffers of kind Buffer.
template <template <typename> class Buffer>
Outcome every_call(Communicator& world) {
  Outcome out;
  const auto x = random_values<float>(1000, 5), y = random_values<float>(1000, 6);
  Buffer<float> a(x), b(1000), c(y);
  expect_ok(world.all_reduce(a.get(), b.get(), 1000, ReduceOp::sum));
  out.f32.push_back(b.host());
  expect_ok(world.all_reduce(c.get(), c.get(), 1000, ReduceOp::max));
  out.f32.push_back(c.host());
  Buffer<bf16> h(random_values<bf16>(999, 7)), g(999);
  expect_ok(world.all_reduce(h.get(), g.get(), 999, ReduceOp::sum));
  out.b16.push_back(g.host());
  Buffer<float> part(257), gathered(300), broadcasted(100);
  expect_ok(world.reduce_scatter(a.get(), part.get(), 257, ReduceOp::sum));
  out.f32.push_back(part.host());
  expect_ok(world.all_gather(a.get(), gathered.get(), 300));
  out.f32.push_back(gathered.host());
  expect_ok(world.broadcast(a.get(), broadcasted.get(), 100, 0));
  out.f32.push_back(broadcasted.host());
  expect_ok(world.barrier());
  // DDP's bucket all-reduces, started and finished later.
  Buffer<float> first(x), second(y);
  expect_ok(world.start_all_reduce(first.get(), first.get(), 1000, ReduceOp::sum));
  expect_ok(world.start_all_reduce(second.get(), second.get(), 1000, ReduceOp::sum));
  expect_ok(world.finish_started());
  out.f32.push_back(first.host());
  out.f32.push_back(second.host());
  auto dp = world.split(0, 0, "dp");
  EXPECT_TRUE(dp.ok());
  if (dp.ok()) {
    EXPECT_EQ((*dp)->name(), "dp");
    EXPECT_EQ((*dp)->size(), 1);
    expect_ok((*dp)->all_reduce(a.get(), b.get(), 10, ReduceOp::sum));
    out.dp = (*dp)->counters();
  }
  const Status send = world.send(a.get(), 1, 0);
  out.refused_send = send.ok() ? "" : send.error().message;
  out.world = world.counters();
  return out;
}

using NcclOneRank = GpuTest;

TEST_F(NcclOneRank, EveryCallMatchesTheLocalBackendAndCountsTheSamePayloads) {
  auto launcher = comm::make_local_communicator();  // the ranks, and the unique id's broadcast
  auto nccl = comm::make_nccl_communicator(*launcher);
  ASSERT_TRUE(nccl.ok()) << nccl.error().message;
  EXPECT_EQ((*nccl)->name(), "world");
  EXPECT_EQ((*nccl)->rank(), 0);
  EXPECT_EQ((*nccl)->size(), 1);
  auto reference = comm::make_local_communicator();
  const Outcome want = every_call<HostBuffer>(*reference);
  const Outcome got = every_call<DeviceBuffer>(**nccl);
  ASSERT_EQ(got.f32.size(), want.f32.size());
  for (size_t i = 0; i < want.f32.size(); ++i) kernels::testing::expect_bits_equal("nccl call " + std::to_string(i), got.f32[i], want.f32[i]);
  kernels::testing::expect_bits_equal("nccl bf16 all_reduce", got.b16[0], want.b16[0]);
  EXPECT_EQ(got.world.calls, want.world.calls);
  EXPECT_EQ(got.world.bytes, want.world.bytes);
  EXPECT_EQ(got.dp.calls, want.dp.calls);
  EXPECT_EQ(got.dp.bytes, want.dp.bytes);
  // comm_types.h's payloads, by hand: 4 f32 all-reduces of 1000, one bf16 of 999.
  EXPECT_EQ(got.world.bytes_of(Collective::all_reduce), 4 * 1000 * 4 + 999 * 2);
  EXPECT_EQ(got.world.bytes_of(Collective::reduce_scatter), 257 * 4);
  EXPECT_EQ(got.world.bytes_of(Collective::all_gather), 300 * 4);
  EXPECT_EQ(got.world.bytes_of(Collective::broadcast), 100 * 4);
  EXPECT_EQ(got.world.calls_of(Collective::barrier), 1);
  EXPECT_EQ(got.dp.bytes_of(Collective::all_reduce), 40);
  EXPECT_EQ(got.refused_send, want.refused_send) << "a one-rank group has no peer, on either backend";
}

// "[Sync Streams]" (nccl.h): a started all-reduce waits for the work queued on
// the compute stream before it, and runs while the compute stream is held.
TEST_F(NcclOneRank, AStartedAllReduceWaitsForTheComputeStreamsWritesThenCompletes) {
  HeldStream compute;
  auto launcher = comm::make_local_communicator();
  auto nccl = comm::make_nccl_communicator(*launcher, comm::NcclOptions{0, compute.get(), comm::kDefaultCommTimeout});
  ASSERT_TRUE(nccl.ok()) << nccl.error().message;
  DeviceBuffer<float> gradients(std::vector<float>(4096, 1.0f)), reduced(4096);
  // Once before the hold: the first call loads the reduction kernel's module
  // (CUDA's lazy loading), which must not happen while a stream is held.
  expect_ok((*nccl)->all_reduce(gradients.get(), reduced.get(), 4096, ReduceOp::sum));
  compute.hold();
  ASSERT_EQ(cudaMemsetAsync(gradients.get(), 0, 4096 * sizeof(float), compute.get()), cudaSuccess);  // backward's last write, held
  expect_ok((*nccl)->start_all_reduce(gradients.get(), reduced.get(), 4096, ReduceOp::sum));
  expect_ok((*nccl)->progress());
  EXPECT_EQ((*nccl)->started_calls(), 1u) << "the all-reduce waits for the held compute stream";
  compute.release();
  expect_ok((*nccl)->finish_started());
  EXPECT_EQ((*nccl)->started_calls(), 0u);
  EXPECT_EQ(reduced.host(), std::vector<float>(4096, 0.0f)) << "it read the gradients after the compute stream wrote them";
  EXPECT_EQ((*nccl)->counters().bytes_of(Collective::all_reduce), 2 * 4096 * 4);
}

// The reductions' scratch (nccl.h: this rank's chunk from every rank) is
// booked under comm_buffers while a call is queued, in a sub-group's
// reductions too, and given back after: one rank's chunk is the whole payload.
TEST_F(NcclOneRank, BooksTheReductionScratchUnderCommBuffers) {
  MemoryLedger ledger;
  auto launcher = comm::make_local_communicator();
  auto nccl = comm::make_nccl_communicator(*launcher, comm::NcclOptions{0, nullptr, comm::kDefaultCommTimeout, &ledger});
  ASSERT_TRUE(nccl.ok()) << nccl.error().message;
  DeviceBuffer<bf16> gradients(std::vector<bf16>(3001, narrow<bf16>(1.0f)));
  expect_ok((*nccl)->start_all_reduce(gradients.get(), gradients.get(), 3001, ReduceOp::sum));
  expect_ok((*nccl)->start_all_reduce(gradients.get(), gradients.get(), 1000, ReduceOp::sum));
  expect_ok((*nccl)->finish_started());
  EXPECT_EQ(ledger.peak(MemoryCategory::comm_buffers, MemorySpace::device), 3001 * 2) << "one call's scratch at a time";
  auto dp = (*nccl)->split(0, 0, "dp");
  ASSERT_TRUE(dp.ok()) << dp.error().message;
  DeviceBuffer<float> wide(std::vector<float>(5000, 1.0f));
  expect_ok((*dp)->all_reduce(wide.get(), wide.get(), 5000, ReduceOp::sum));
  EXPECT_EQ(ledger.peak(MemoryCategory::comm_buffers, MemorySpace::device), 5000 * 4) << "the sub-group books in the same ledger";
  EXPECT_EQ(ledger.current(MemoryCategory::comm_buffers, MemorySpace::device), 0);
}

// Without a device (CI), making one fails in one line; with one, this is the test above's business.
TEST(NcclWithoutDevice, MakingOneSaysSoInOneLine) {
  if (no_device_reason().empty()) GTEST_SKIP() << "a CUDA device is present: NcclOneRank covers it";
  auto local = comm::make_local_communicator();
  auto nccl = comm::make_nccl_communicator(*local);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.error().code, ErrorCode::comm_error);
  EXPECT_NE(nccl.error().message.find("making NCCL communicator 'world' (rank 0 of 1): CUDA device 0 cannot be used (no CUDA device?): cudaSetDevice failed: "),
            std::string::npos)
      << nccl.error().message;
  EXPECT_EQ(nccl.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(local->counters().calls_of(Collective::broadcast), 0) << "it fails before the id is broadcast";
}

TEST(NcclWithoutDevice, ANonPositiveTimeoutIsRefused) {
  auto local = comm::make_local_communicator();
  auto nccl = comm::make_nccl_communicator(*local, comm::NcclOptions{0, nullptr, std::chrono::duration<double>(0)});
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.error().message, "a communication timeout of 0 s is not positive; give --comm-timeout a number of seconds above 0");
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
