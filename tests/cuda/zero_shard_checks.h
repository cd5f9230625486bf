// What the GPU ZeRO tests (zero_gpu_test.cpp: low_level_zero;
// hybrid_zero_gpu_test.cpp: hybrid_parallel's ZeRO of each tensor-parallel
// part) check of one rank's step beside the CPU engine's: the collectives, the reduced
// gradient shard against the CPU ZeRO-1's, the update against the CPU
// optimizer of the same shard, and the ledger's peaks against the planner.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/comm/comm_types.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine::cuda::testing {

// One rank's ZeRO step on the GPU: `held` is what it shards (the model, or
// under tensor parallelism its part), over `dp` ranks of which it is `rank`.
struct GpuShardStep {
  const planner::Model& held;
  planner::PluginOptions plugin;
  int64_t dp = 1, rank = 0;
  std::vector<bf16> initial, updated;  // the parameters before and after the step, flat
  std::vector<bf16> shard_gradients;   // the reduced gradient shard the update read
  double grad_norm = 0;
};

// NCCL's reduce-scatters, all-gathers and all-reduces on `group` (calls and
// bytes, `moved`) equal the CPU engine's on MPI (`want`).
inline void check_same_calls(const char* group, const comm::CommCounters& moved, const comm::CommCounters& want, Checker& check, const std::string& prefix) {
  for (const comm::Collective c : {comm::Collective::reduce_scatter, comm::Collective::all_gather, comm::Collective::all_reduce}) {
    check.expect(moved.calls_of(c) == want.calls_of(c) && moved.bytes_of(c) == want.bytes_of(c),
                 prefix + "NCCL's " + group + " " + std::string(enum_name(c)) + " calls and bytes (" + std::to_string(moved.calls_of(c)) + ", " +
                     std::to_string(moved.bytes_of(c)) + ") equal the CPU engine's (" + std::to_string(want.calls_of(c)) + ", " +
                     std::to_string(want.bytes_of(c)) + ")");
  }
}

// The reduced shard, piece by piece, within 2^-4 in norm of the CPU ZeRO-1's
// (`zero1_reduced`: its flat gradients, this rank's shard reduced;
// ddp_gpu_test.cpp's bound, for its reasons: both store bf16 and compute in
// fp32 but round at other points); then the update: the CPU optimizer of the
// same shard (planner/optimizer_layout.h's pieces) applied to the GPU's
// reduced shard from the same weights, within one bf16 unit of each weight (2^-7 relative).
inline void check_shard_and_update(const GpuShardStep& gpu, const std::vector<bf16>& zero1_reduced, int report_rank, Checker& check, const std::string& prefix) {
  const planner::OptimizerLayout layout = planner::optimizer_layout(gpu.held, gpu.plugin, gpu.dp, gpu.rank);
  check.expect(static_cast<int64_t>(gpu.shard_gradients.size()) == layout.shard_numel, prefix + "the GPU's gradients are this rank's shard");
  if (static_cast<int64_t>(gpu.shard_gradients.size()) != layout.shard_numel) return;
  const int64_t shard = layout.shard_numel, first = gpu.rank * shard;  // this rank's shard in ZeRO-1's flat gradients
  double worst_piece = 0;
  for (const planner::ShardPiece& piece : layout.pieces) {
    double difference = 0, reference = 0;
    for (int64_t i = piece.offset_in_shard; i < piece.offset_in_shard + piece.numel; ++i) {
      const double want = static_cast<double>(widen(zero1_reduced[static_cast<size_t>(first + i)]));
      const double d = static_cast<double>(widen(gpu.shard_gradients[static_cast<size_t>(i)])) - want;
      difference += d * d;
      reference += want * want;
    }
    worst_piece = std::max(worst_piece, std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30));
  }
  report(report_rank, prefix + "reduced gradient shard (worst piece)", worst_piece, std::ldexp(1.0, -4));
  check.expect(worst_piece <= std::ldexp(1.0, -4), prefix + "every piece of the reduced shard within 2^-4 of the CPU ZeRO-1's: " + std::to_string(worst_piece));

  const int64_t params = gpu.held.parameter_count;
  std::vector<bf16> shard_params(static_cast<size_t>(shard), bf16{});
  for (int64_t i = 0; i < shard && first + i < params; ++i) shard_params[static_cast<size_t>(i)] = gpu.initial[static_cast<size_t>(first + i)];
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(gpu.held.inventory)) {
    shapes.push_back(gpu.held.inventory.tensors[static_cast<size_t>(flat.tensor_index)].shape);
  }
  MemoryLedger cpu_ledger;
  Optimizer<bf16> optimizer(cpu_ledger, shard_params.data(), shard, layout.pieces, decay_mask(shapes), OptimizerOptions{});
  check.expect(optimizer.apply(gpu.shard_gradients.data(), gpu.grad_norm * gpu.grad_norm, 1.0).has_value(), prefix + "the CPU optimizer steps");
  double worst = 0;
  for (int64_t i = 0; i < shard && first + i < params; ++i) {
    worst = std::max(worst, relative(static_cast<double>(widen(gpu.updated[static_cast<size_t>(first + i)])), static_cast<double>(widen(shard_params[static_cast<size_t>(i)]))));
  }
  report(report_rank, prefix + "updated shard", worst, std::ldexp(1.0, -7));
  check.expect(worst <= std::ldexp(1.0, -7), prefix + "the updated shard within one bf16 unit of the CPU optimizer's: " + std::to_string(worst));
}

// The planner's device bytes of the model states' categories for the run
// (`model` whole, on `layout`, micro-batch B of T tokens) against the
// ledger's peaks: each block is rounded up to 512 bytes
// (device/caching_allocator.h), and the optimizer states are two blocks.
// ZeRO-Offload's host side, exactly: the CPU optimizer's master weights and
// states, and the fp32 gradient shard's pinned transfer buffer at the pinned
// allocator's power of two, as the planner counts it for a GPU run
// (planner/pinned_host_blocks.h).
inline void check_ledger(const planner::Model& model, const planner::PluginOptions& plugin, const planner::ParallelLayout& layout, int64_t B, int64_t T,
                         const MemoryLedger& ledger, Checker& check, const std::string& prefix) {
  auto gpu = planner::load_gpu("h100-80g");
  check.expect(gpu.ok(), prefix + "the h100-80g profile");
  if (!gpu.ok()) return;
  planner::EstimateRequest request;
  request.layout = layout;
  request.plugin = plugin;
  request.training.micro_batch_size = B;
  request.training.seq_len = T;
  request.training.activation_profile = planner::ActivationProfile::tessera_gpu;  // the GPU step's: its host blocks pinned
  auto estimate = planner::estimate_memory(model, gpu.value(), request);
  check.expect(estimate.ok(), prefix + "the planner's estimate");
  if (!estimate.ok()) return;
  const planner::RankMemory& row = estimate->ranks.at(0);
  for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::master_weights,
                                        MemoryCategory::optimizer_states, MemoryCategory::comm_buffers}) {
    const int64_t planned = row.bytes[category].device, booked = ledger.peak(category, MemorySpace::device);
    check.expect(booked >= planned && booked < planned + 2 * 512, prefix + "the ledger's " + std::string(to_string(category)) + " " +
                                                                       std::to_string(booked) + " bytes are the planner's " + std::to_string(planned));
  }
  for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::master_weights,
                                        MemoryCategory::optimizer_states}) {
    const int64_t planned = row.bytes[category].host, booked = ledger.peak(category, MemorySpace::host);
    check.expect(booked == planned, prefix + "the ledger's host " + std::string(to_string(category)) + " " + std::to_string(booked) +
                                        " bytes are the planner's " + std::to_string(planned));
  }
}

}  // namespace tessera::engine::cuda::testing
