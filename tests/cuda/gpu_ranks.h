// What the multi-rank GPU test programs share (ddp_gpu_test.cpp,
// zero_gpu_test.cpp, gemini_gpu_test.cpp): the small models, and each rank takes the GPU tessera train --gpu would give
// it, an NCCL communicator over the ranks and MPI's world for the CPU engine
// and the checks' agreements; every rank makes every call whatever fails, and
// the ranks agree on the verdict. Plain programs under mpirun, outside
// GoogleTest: exit 0 when every check passed on every rank, 1 when one
// failed, 77 on every rank (one line) where a rank has no GPU of its own.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../support/rank_checker.h"
#include "small_models.h"
#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/comm/nccl.h"
#include "tessera/engine/device/rank_device.h"
#include "tessera/engine/half.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine::cuda::testing {

using Checker = tessera::testing::RankChecker;

inline double relative(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); }

// Rank 0 prints each measured error beside its bound (tools/gpu-check keeps these lines).
inline void report(int rank, const std::string& what, double error, double tolerance) {
  if (rank == 0) std::printf("  %-60s relative error %.3g (tolerance %.3g)\n", what.c_str(), error, tolerance);
}

// The relative error, in norm, of `got`'s elements of one flat parameter against `want`'s.
inline double parameter_error(const std::vector<bf16>& got, const std::vector<bf16>& want, const planner::FlatParameter& flat) {
  double difference = 0, reference = 0;
  for (int64_t i = flat.offset; i < flat.offset + flat.numel; ++i) {
    const double w = static_cast<double>(widen(want[static_cast<size_t>(i)]));
    const double d = static_cast<double>(widen(got[static_cast<size_t>(i)])) - w;
    difference += d * d;
    reference += w * w;
  }
  return std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30);
}

// Whether `values` are the same bits on every rank: rank 0's broadcast over MPI, compared here.
template <typename X>
bool same_on_every_rank(comm::Communicator& mpi, const std::vector<X>& values) {
  std::vector<X> first(values);
  if (!mpi.broadcast(first.data(), first.data(), first.size(), 0).ok()) return false;
  double differs = std::memcmp(first.data(), values.data(), values.size() * sizeof(X)) != 0 ? 1.0 : 0.0;
  if (!mpi.all_reduce(&differs, &differs, 1, comm::ReduceOp::max).ok()) return false;
  return differs == 0.0;
}

// The context group's sends and recvs since the step began (`moved`) against
// the CPU ring's (`want`) and the planner's: `ring` of them
// (planner::ring_sends per block and micro-batch), each one K/V block of
// `block_bytes` (planner::ring_block_elements in bf16).
inline void check_ring_traffic(const std::string& prefix, const comm::CommCounters& moved, const comm::CommCounters& want, int64_t ring, int64_t block_bytes,
                               Checker& check) {
  for (const comm::Collective c : {comm::Collective::send, comm::Collective::recv}) {
    check.expect(moved.calls_of(c) == want.calls_of(c) && moved.bytes_of(c) == want.bytes_of(c) && moved.calls_of(c) == ring &&
                     moved.bytes_of(c) == ring * block_bytes,
                 prefix + "NCCL's ring " + std::string(enum_name(c)) + "s (" + std::to_string(moved.calls_of(c)) + ", " + std::to_string(moved.bytes_of(c)) +
                     " bytes) are the CPU ring's (" + std::to_string(want.calls_of(c)) + ", " + std::to_string(want.bytes_of(c)) +
                     ") and planner::ring_sends' " + std::to_string(ring) + " blocks of " + std::to_string(block_bytes) + " bytes");
  }
}

// Runs `checks(mpi, nccl, check)` on every rank of MPI's world, one GPU per
// rank by the rule tessera train --gpu follows, on min_ranks ranks or more;
// `program` names the lines.
template <typename Checks>
int run_on_gpu_ranks(const char* program, Checks&& checks, int min_ranks = 2) {
  auto runtime = comm::MpiRuntime::start();
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, runtime.error().message.c_str());
    return 1;
  }
  auto bootstrap = (*runtime)->world();  // the unique id's broadcast
  auto mpi = (*runtime)->world();        // the CPU engine's group and the checks' agreements
  if (!bootstrap.ok() || !mpi.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, (!bootstrap.ok() ? bootstrap.error() : mpi.error()).message.c_str());
    return 1;
  }
  comm::Communicator& world = **mpi;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  auto device = device_of_local_rank(local_rank_of(world.rank(), world.size(), std::getenv), devices);
  double missing = device.ok() && world.size() >= min_ranks ? 0.0 : 1.0;
  if (Status s = (*bootstrap)->all_reduce(&missing, &missing, 1, comm::ReduceOp::max); !s || missing > 0) {
    if (world.rank() == 0) {
      std::printf("%s: skipped: %d ranks need %d or more GPUs, one each; this machine has %d\n", program, world.size(), std::max(min_ranks, world.size()), devices);
    }
    return 77;
  }
  Checker check(world.rank());
  auto nccl = comm::make_nccl_communicator(**bootstrap, comm::NcclOptions{device.value(), nullptr, comm::kDefaultCommTimeout});
  if (!nccl.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", world.rank(), nccl.error().message.c_str());
    return 1;
  }
  checks(world, **nccl, check);
  double worst = check.failures();
  if (Status s = world.all_reduce(&worst, &worst, 1, comm::ReduceOp::max); !s) return 1;
  if (world.rank() == 0) std::printf("%s: %d ranks, %s\n", program, world.size(), worst == 0.0 ? "all checks passed" : "checks failed (see above)");
  return worst == 0.0 ? 0 : 1;
}

// A layout's groups twice, in the planner's rank order (parallel/process_groups.h):
// MPI's for the CPU engine and the checks, NCCL's for the GPU step.
struct LayoutGroups {
  ProcessGroups mpi, nccl;
};

// run_on_gpu_ranks with the groups of the layout `layout_of(ranks)` gives
// the launched ranks, over small_models.h's GPT-2 and Qwen2, a step of one
// micro-batch and of 2 accumulated ones each: check_model(name, model,
// micro_batches, mpi, groups, check); `ranks` says in the failed check's line
// how many ranks the layout takes.
template <typename LayoutOf, typename CheckModel>
int check_small_models_on_layout(const char* program, LayoutOf&& layout_of, const std::string& ranks, CheckModel&& check_model, int min_ranks) {
  return run_on_gpu_ranks(program, [&](comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
    const planner::ParallelLayout layout = layout_of(mpi.size());
    auto host = make_process_groups(mpi, layout);
    auto device = make_process_groups(nccl, layout);
    check.expect(host.ok() && device.ok(), "the layout's groups: launch " + ranks + " ranks");
    if (!host.ok() || !device.ok()) return;
    LayoutGroups groups{std::move(host).value(), std::move(device).value()};
    for (const int64_t micro_batches : {1, 2}) {
      check_model("gpt2", small_model(kSmallGpt2), micro_batches, mpi, groups, check);
      check_model("qwen2", small_model(kSmallQwen2), micro_batches, mpi, groups, check);
    }
  }, min_ranks);
}

// run_on_gpu_ranks over small_models.h's GPT-2 and Qwen2, a step of one
// micro-batch and of 2 accumulated ones each:
// check_model(name, model, micro_batches, mpi, nccl, check).
template <typename CheckModel>
int check_small_models_on_gpu_ranks(const char* program, CheckModel&& check_model, int min_ranks = 2) {
  return run_on_gpu_ranks(program, [&](comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
    for (const int64_t micro_batches : {1, 2}) {
      check_model("gpt2", small_model(kSmallGpt2), micro_batches, mpi, nccl, check);
      check_model("qwen2", small_model(kSmallQwen2), micro_batches, mpi, nccl, check);
    }
  }, min_ranks);
}

}  // namespace tessera::engine::cuda::testing
