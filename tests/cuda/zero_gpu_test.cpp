// ZeRO-1/2 on one GPU per rank: `mpirun -np N tessera_zero_gpu_test`
// (tools/gpu-check runs it with N = the GPUs where there are 2 or more;
// ctest on 2 ranks, skipped without 2 GPUs). Each rank runs one step of the
// GPU training step under low_level_zero over NCCL (cuda/gpt_training.h,
// src/cuda/zero_shards.h) and one step of the CPU engine's low_level_zero
// over MPI (parallel/data_parallel.h) on the same rank's micro-batch (and
// again on 2 accumulated micro-batches), from the same weights, for stage 1
// (a 40000-element reduce bucket: several pieces), stage 2 with a bucket as
// large as the model and stage 2 with a 40000-element bucket (filled a layer
// at a time in every backward), and stage 1 and bucketed stage 2 with
// ZeRO-Offload (--cpu-offload: the optimizer on the host, zero_offload.h)
// against the CPU engine's ZeRO-Offload, on ddp_gpu_test.cpp's small GPT-2
// (tied head) and Qwen2. Stage 1 with several pieces and bucketed stage 2
// reduce while backward goes on, through two buckets (parallel/zero_overlap.h:
// reduce-scatters started on NCCL's stream while the compute stream runs the
// next layers); two more cases stress the buckets' reuse: stage 1 with pieces
// of 997 elements and stage 2 with the smallest bucket (the largest layer's
// gradients: a bucket started before almost every layer).
//
// Checked, on every rank:
//  - the updated weights (all-gathered) and the gradient norm are the same
//    bits on every rank;
//  - NCCL's reduce-scatters, all-gathers and all-reduces (calls and bytes)
//    equal the CPU ZeRO's on MPI: the same pieces and bucket runs in the same
//    order (parallel/zero_buckets.h, zero_overlap.h), and no started call is
//    left pending after the step;
//  - this rank's loss and the global gradient norm within 2^-6 relative of
//    the CPU ZeRO's, and the reduced gradient shard, per piece, within 2^-4
//    in norm of the CPU ZeRO-1's reduced shard (ddp_gpu_test.cpp's bounds,
//    for its reasons: both store bf16 and compute in fp32 but round at other points);
//  - the update against the CPU optimizer of the same shard
//    (planner/optimizer_layout.h's pieces) applied to the GPU's reduced
//    gradient shard, within one bf16 unit of each weight (2^-7 relative);
//  - the ledger's device peaks of the model states' categories are the
//    planner's estimate of the same run (planner/memory_model.h), each
//    block rounded up to the caching allocator's 512 bytes; offloaded, the
//    host's master weights and states exactly, its gradient shard rounded
//    up to the pinned allocator's power of two.
// These bounds have not yet met a GPU.
// A plain program under mpirun (gpu_ranks.h): exit 77 on every rank (one
// line) where a rank has no GPU of its own.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cpu_reference_step.h"
#include "gpu_ranks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/registry.h"

namespace tessera::engine::cuda {
namespace {

using testing::Batch;
using testing::Checker;
using testing::CpuStep;
using testing::relative;
using testing::report;
using testing::same_on_every_rank;

constexpr int64_t B = 2, T = 37, kMicroTokens = B * T;
constexpr uint64_t kSeed = 5;
constexpr int64_t kSmallBucket = 40000;  // elements: several stage-1 pieces, a stage-2 bucket smaller than the model
constexpr int64_t kTinyPiece = 997;      // elements of each rank's shard per stage-1 piece: many pieces, the two buckets reused often

planner::PluginOptions zero_plugin(int stage, int64_t reduce_bucket_numel, bool cpu_offload = false) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::low_level_zero;
  plugin.zero_stage = stage;
  plugin.reduce_bucket_numel = reduce_bucket_numel;
  plugin.cpu_offload = cpu_offload;
  return plugin;
}

// The planner's device bytes of the model states' categories for this run
// against the ledger's peaks: each block is rounded up to 512 bytes
// (device/caching_allocator.h), and the optimizer states are two blocks.
void check_ledger(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, const MemoryLedger& ledger, Checker& check,
                  const std::string& prefix) {
  auto gpu = planner::load_gpu("h100-80g");
  check.expect(gpu.ok(), prefix + "the h100-80g profile");
  if (!gpu.ok()) return;
  planner::EstimateRequest request;
  request.layout.dp = ranks;
  request.plugin = plugin;
  request.training.micro_batch_size = B;
  request.training.seq_len = T;
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
  // ZeRO-Offload's host side: the CPU optimizer's master weights and states
  // exactly; the fp32 gradient shard is the pinned transfer buffer, rounded
  // up to a power of two by the pinned allocator (device/pinned_host_allocator.h).
  for (const MemoryCategory category : {MemoryCategory::master_weights, MemoryCategory::optimizer_states}) {
    check.expect(ledger.peak(category, MemorySpace::host) == row.bytes[category].host, prefix + "the ledger's host " + std::string(to_string(category)));
  }
  const int64_t planned = row.bytes[MemoryCategory::gradients].host, booked = ledger.peak(MemoryCategory::gradients, MemorySpace::host);
  check.expect(booked >= planned && booked < 2 * std::max<int64_t>(planned, 1), prefix + "the ledger's host gradients " + std::to_string(booked) +
                                                                                     " bytes are the planner's " + std::to_string(planned) + ", rounded up");
}

// `cpu`: the CPU ZeRO's step of the same plugin; `zero1`: ZeRO-1's (the reduced shard).
void check_one_case(const std::string& prefix, const planner::Model& model, const planner::PluginOptions& plugin, const Batch& batch, const CpuStep& cpu,
                    const CpuStep& zero1, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const int rank = mpi.rank();
  if (!cpu.ok || !zero1.ok) return;

  const comm::CommCounters nccl_before = nccl.counters();
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, kSeed, OptimizerOptions{}, GpuDataParallel{&nccl, plugin});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  auto stepped = gpu.step(batch.tokens.data(), batch.targets.data(), batch.micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU ZeRO step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> shard_grads = gpu.gradients(), updated = gpu.parameters();
  const comm::CommCounters moved = nccl.counters().since(nccl_before);
  check.expect(nccl.started_calls() == 0, prefix + "every started reduce-scatter finished within the step");

  check.expect(same_on_every_rank(mpi, updated), prefix + "the updated weights are the same bits on every rank");
  check.expect(same_on_every_rank(mpi, std::vector<double>{stepped->grad_norm}), prefix + "the gradient norm is the same on every rank");
  for (const comm::Collective c : {comm::Collective::reduce_scatter, comm::Collective::all_gather, comm::Collective::all_reduce}) {
    check.expect(moved.calls_of(c) == cpu.moved.calls_of(c) && moved.bytes_of(c) == cpu.moved.bytes_of(c),
                 prefix + "NCCL's " + std::string(enum_name(c)) + " calls and bytes (" + std::to_string(moved.calls_of(c)) + ", " +
                     std::to_string(moved.bytes_of(c)) + ") equal the CPU ZeRO's (" + std::to_string(cpu.moved.calls_of(c)) + ", " +
                     std::to_string(cpu.moved.bytes_of(c)) + ")");
  }
  const double loss_error = relative(stepped->loss, cpu.loss), norm_error = relative(stepped->grad_norm, cpu.norm);
  report(rank, prefix + "loss (rank 0's micro-batches)", loss_error, std::ldexp(1.0, -6));
  report(rank, prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU ZeRO's: " + std::to_string(loss_error));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU ZeRO's: " + std::to_string(norm_error));

  // The reduced shard, piece by piece, against the CPU ZeRO-1's.
  const planner::OptimizerLayout layout = planner::optimizer_layout(model, plugin, mpi.size(), rank);
  check.expect(static_cast<int64_t>(shard_grads.size()) == layout.shard_numel, prefix + "the GPU's gradients are this rank's shard");
  if (static_cast<int64_t>(shard_grads.size()) != layout.shard_numel) return;
  const int64_t shard_begin = rank * planner::shard_numel(model.parameter_count, mpi.size());  // this rank's shard in ZeRO-1's flat gradients
  double worst_piece = 0;
  for (const planner::ShardPiece& piece : layout.pieces) {
    double difference = 0, reference = 0;
    for (int64_t i = piece.offset_in_shard; i < piece.offset_in_shard + piece.numel; ++i) {
      const double want = static_cast<double>(widen(zero1.reduced[static_cast<size_t>(shard_begin + i)]));
      const double d = static_cast<double>(widen(shard_grads[static_cast<size_t>(i)])) - want;
      difference += d * d;
      reference += want * want;
    }
    worst_piece = std::max(worst_piece, std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30));
  }
  report(rank, prefix + "reduced gradient shard (worst piece)", worst_piece, std::ldexp(1.0, -4));
  check.expect(worst_piece <= std::ldexp(1.0, -4), prefix + "every piece of the reduced shard within 2^-4 of the CPU ZeRO-1's: " + std::to_string(worst_piece));

  // The update: the CPU optimizer of this shard on the GPU's reduced gradients, from the same weights.
  const int64_t shard = layout.shard_numel, first = rank * shard;
  std::vector<bf16> shard_params(static_cast<size_t>(shard), bf16{});
  for (int64_t i = 0; i < shard && first + i < model.parameter_count; ++i) shard_params[static_cast<size_t>(i)] = initial[static_cast<size_t>(first + i)];
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(model.inventory)) {
    shapes.push_back(model.inventory.tensors[static_cast<size_t>(flat.tensor_index)].shape);
  }
  MemoryLedger cpu_ledger;
  Optimizer<bf16> optimizer(cpu_ledger, shard_params.data(), shard, layout.pieces, decay_mask(shapes), OptimizerOptions{});
  check.expect(optimizer.apply(shard_grads.data(), stepped->grad_norm * stepped->grad_norm, 1.0).has_value(), prefix + "the CPU optimizer steps");
  double worst = 0;
  for (int64_t i = 0; i < shard && first + i < model.parameter_count; ++i) {
    worst = std::max(worst, relative(static_cast<double>(widen(updated[static_cast<size_t>(first + i)])), static_cast<double>(widen(shard_params[static_cast<size_t>(i)]))));
  }
  report(rank, prefix + "updated shard", worst, std::ldexp(1.0, -7));
  check.expect(worst <= std::ldexp(1.0, -7), prefix + "the updated shard within one bf16 unit of the CPU optimizer's: " + std::to_string(worst));

  made.value().reset();  // its memory back: the peaks stay
  check_ledger(model, plugin, mpi.size(), gpu_ledger, check, prefix);
}

void check_model(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const auto seed = static_cast<uint32_t>(mpi.rank());
  Batch batch{testing::random_tokens(static_cast<size_t>(micro_batches * kMicroTokens), 97, 1 + 2 * seed),
              testing::random_tokens(static_cast<size_t>(micro_batches * kMicroTokens), 97, 2 + 2 * seed), micro_batches};
  const std::string accumulated = micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ";
  const CpuStep zero1 = testing::cpu_reference_step(model, zero_plugin(1, kSmallBucket), batch, B, T, kSeed, mpi, check, std::string(name) + " zero1" + accumulated);
  for (const auto& [label, plugin] : {std::pair{"zero1", zero_plugin(1, kSmallBucket)}, std::pair{"zero2", zero_plugin(2, planner::padded_flat_numel(model.parameter_count, mpi.size()))},
                                      std::pair{"zero2 bucketed", zero_plugin(2, kSmallBucket)},
                                      std::pair{"zero1 tiny pieces", zero_plugin(1, kTinyPiece * mpi.size())},
                                      std::pair{"zero2 smallest bucket", zero_plugin(2, 1)}, std::pair{"zero1 offload", zero_plugin(1, kSmallBucket, true)},
                                      std::pair{"zero2 bucketed offload", zero_plugin(2, kSmallBucket, true)}}) {
    const std::string prefix = std::string(name) + " " + label + accumulated;
    const bool same_as_zero1 = plugin.effective_zero_stage() == 1 && !plugin.cpu_offload && plugin.reduce_bucket_numel == kSmallBucket;
    const CpuStep cpu = same_as_zero1 ? zero1 : testing::cpu_reference_step(model, plugin, batch, B, T, kSeed, mpi, check, prefix);
    check_one_case(prefix, model, plugin, batch, cpu, zero1, mpi, nccl, check);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("zero_gpu_test", tessera::engine::cuda::check_model); }
