// The NCCL communicator on one GPU per rank: `mpirun -np N
// tessera_nccl_ranks_gpu_test` (tools/gpu-check runs it with N = the GPUs
// where there are 2 or more). Every call is made twice, on the NCCL group with
// device buffers and on an MPI group with host buffers: the results must be
// the same bits (both reduce in rank order, nccl.h) and the counters equal.
// Then a barrier only rank 0 makes must time out there in one line.
// A plain program, as mpi_communicator_test.cpp: every rank makes every call
// whatever fails, and the ranks agree on the verdict. Exit 77 on every rank
// (one line) where a rank has no GPU of its own.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_buffer.h"
#include "../support/rank_checker.h"
#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/comm/nccl.h"
#include "tessera/engine/device/rank_device.h"

namespace tessera::engine::comm {
namespace {

using Checker = tessera::testing::RankChecker;

// Rank-dependent values whose float sum depends on the order of the ranks.
template <typename T>
std::vector<T> contributions(int rank, size_t count) {
  std::vector<T> x(count);
  for (size_t i = 0; i < count; ++i) {
    const float sign = (i + static_cast<size_t>(rank)) % 3 == 0 ? -1.0f : 1.0f;
    x[i] = narrow<T>(sign * (rank % 2 == 0 ? 1.0e4f : 1.0f) + 0.1f * static_cast<float>(i) + 0.01f * static_cast<float>(rank));
  }
  return x;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// `call(group, send, recv)` on both backends with the same inputs; the outputs must agree bit for bit.
template <typename T, typename Call>
void both(Communicator& nccl, Communicator& mpi, Checker& check, const std::string& what, const std::vector<T>& input, size_t out_count, Call call) {
  std::vector<T> mpi_out(out_count, narrow<T>(-1.0f));
  cuda::testing::DeviceBuffer<T> send(input), recv(mpi_out);
  check.expect_ok(call(nccl, send.get(), recv.get()), what + " (NCCL)");
  check.expect_ok(call(mpi, input.data(), mpi_out.data()), what + " (MPI)");
  check.expect(same_bits(recv.host(), mpi_out), what + ": NCCL and MPI give the same bits");
}

void check_group(Communicator& nccl, Communicator& mpi, Checker& check) {
  const int n = nccl.size(), r = nccl.rank();
  for (size_t count : {size_t{1}, size_t{3}, size_t{7}, size_t{1000}}) {
    both<float>(nccl, mpi, check, "all_reduce sum of " + std::to_string(count), contributions<float>(r, count), count,
                [&](Communicator& c, const float* s, float* d) { return c.all_reduce(s, d, count, ReduceOp::sum); });
  }
  both<bf16>(nccl, mpi, check, "bf16 all_reduce sum", contributions<bf16>(r, 999), 999,
             [](Communicator& c, const bf16* s, bf16* d) { return c.all_reduce(s, d, 999, ReduceOp::sum); });
  both<float>(nccl, mpi, check, "all_reduce max", contributions<float>(r, 100), 100,
              [](Communicator& c, const float* s, float* d) { return c.all_reduce(s, d, 100, ReduceOp::max); });
  both<float>(nccl, mpi, check, "reduce_scatter", contributions<float>(r, 257 * static_cast<size_t>(n)), 257,
              [](Communicator& c, const float* s, float* d) { return c.reduce_scatter(s, d, 257, ReduceOp::sum); });
  both<float>(nccl, mpi, check, "all_gather", contributions<float>(r, 300), 300 * static_cast<size_t>(n),
              [](Communicator& c, const float* s, float* d) { return c.all_gather(s, d, 300); });
  both<float>(nccl, mpi, check, "broadcast from the last rank", contributions<float>(r, 100), 100,
              [&](Communicator& c, const float* s, float* d) { return c.broadcast(s, d, 100, n - 1); });
  // Started all-reduces (DDP's buckets), finished together.
  both<float>(nccl, mpi, check, "started all_reduces", contributions<float>(r, 1000), 1000, [](Communicator& c, const float* s, float* d) {
    if (Status st = c.start_all_reduce(s, d, 500, ReduceOp::sum); !st) return st;
    if (Status st = c.start_all_reduce(s + 500, d + 500, 500, ReduceOp::sum); !st) return st;
    return c.finish_started();
  });
  // Started all-gathers (FSDP's prefetch), finished in order.
  both<float>(nccl, mpi, check, "started all_gathers", contributions<float>(r, 300), 300 * static_cast<size_t>(n), [n](Communicator& c, const float* s, float* d) {
    if (Status st = c.start_all_gather(s, d, 150, DataType::f32); !st) return st;
    if (Status st = c.start_all_gather(s + 150, d + 150 * static_cast<size_t>(n), 150, DataType::f32); !st) return st;
    return c.finish_started();
  });
  // A ring: even ranks send first, so that no two ranks wait for each other.
  both<float>(nccl, mpi, check, "send and recv around the ring", contributions<float>(r, 64), 64, [&](Communicator& c, const float* s, float* d) {
    const int next = (r + 1) % n, previous = (r + n - 1) % n;
    if (r % 2 == 0) {
      if (Status st = c.send(s, 64, next); !st) return st;
      return c.recv(d, 64, previous);
    }
    if (Status st = c.recv(d, 64, previous); !st) return st;
    return c.send(s, 64, next);
  });
  check.expect_ok(nccl.barrier(), "barrier (NCCL)");
  check.expect_ok(mpi.barrier(), "barrier (MPI)");
  check.expect(nccl.counters().calls == mpi.counters().calls && nccl.counters().bytes == mpi.counters().bytes,
               "NCCL's counters equal MPI's for the same calls");
}

int run(MpiRuntime& runtime) {
  auto bootstrap = runtime.world();  // the GPU check and the unique id's broadcast
  auto mpi = runtime.world();        // the reference, whose counters count only the calls compared
  if (!bootstrap.ok() || !mpi.ok()) {
    std::fprintf(stderr, "nccl_ranks_gpu_test: %s\n", (!bootstrap.ok() ? bootstrap.error() : mpi.error()).message.c_str());
    return 1;
  }
  Communicator& world = **mpi;
  // One GPU per rank of this machine, by the rule tessera train --gpu follows.
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  const auto local = device_of_local_rank(local_rank_of(world.rank(), world.size(), std::getenv), devices);
  const int device = local.ok() ? local.value() : 0;
  double missing = local.ok() ? 0.0 : 1.0;
  if (Status s = (*bootstrap)->all_reduce(&missing, &missing, 1, ReduceOp::max); !s || missing > 0) {
    if (world.rank() == 0) std::printf("nccl_ranks_gpu_test: skipped: %d ranks need a GPU each; this machine has %d\n", world.size(), devices);
    return 77;
  }
  Checker check(world.rank());
  auto nccl = make_nccl_communicator(**bootstrap, NcclOptions{device, nullptr, kDefaultCommTimeout});
  if (!nccl.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), nccl.error().message.c_str());
    return 1;
  }
  check_group(**nccl, world, check);
  // Even and odd ranks, as the dp/tp groups are made.
  auto nccl_half = (*nccl)->split(world.rank() % 2, world.rank(), "parity");
  auto mpi_half = world.split(world.rank() % 2, world.rank(), "parity");
  check.expect(nccl_half.ok() && mpi_half.ok(), "split by parity");
  if (nccl_half.ok() && mpi_half.ok()) {
    check.expect((*nccl_half)->size() == (*mpi_half)->size() && (*nccl_half)->rank() == (*mpi_half)->rank(), "the same groups as MPI_Comm_split");
    if ((*nccl_half)->size() > 1) check_group(**nccl_half, **mpi_half, check);
  }
  // --comm-timeout: rank 0 waits in a barrier the others never make, gives up
  // after 2 s in one line, and its communicator is aborted.
  auto short_lived = make_nccl_communicator(**bootstrap, NcclOptions{device, nullptr, std::chrono::duration<double>(2.0)});
  check.expect(short_lived.ok(), "an NCCL communicator with a 2 s timeout");
  if (short_lived.ok() && world.rank() == 0) {
    const Status waited = (*short_lived)->barrier();
    const std::string message = waited.ok() ? "" : waited.error().message;
    check.expect(message.find("barrier on 'world' (rank 0 of ") == 0 && message.find("did not complete within 2 s (--comm-timeout)") != std::string::npos &&
                     message.find("ncclCommAbort") != std::string::npos,
                 "the lone barrier times out in one line: " + message);
    const Status after = (*short_lived)->barrier();
    check.expect(!after.ok() && after.error().message.find("aborted") != std::string::npos, "an aborted communicator refuses every later call");
  }
  check.expect_ok((*bootstrap)->barrier(), "the ranks meet again over MPI");
  double worst = check.failures();
  if (Status s = world.all_reduce(&worst, &worst, 1, ReduceOp::max); !s) return 1;
  if (world.rank() == 0) std::printf("nccl_ranks_gpu_test: %d ranks, %s\n", world.size(), worst == 0.0 ? "all checks passed" : "checks failed (see above)");
  return worst == 0.0 ? 0 : 1;
}

}  // namespace
}  // namespace tessera::engine::comm

int main() {
  auto runtime = tessera::engine::comm::MpiRuntime::start();
  if (!runtime.ok()) {
    std::fprintf(stderr, "nccl_ranks_gpu_test: %s\n", runtime.error().message.c_str());
    return 1;
  }
  return tessera::engine::comm::run(**runtime);
}
