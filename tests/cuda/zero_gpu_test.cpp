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
//    host's master weights and states and its pinned gradient shard
//    exactly (the planner counts the pinned allocator's power of two).
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
#include "zero_shard_checks.h"
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
using testing::GpuShardStep;
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
  testing::check_same_calls("dp", moved, cpu.moved, check, prefix);
  const double loss_error = relative(stepped->loss, cpu.loss), norm_error = relative(stepped->grad_norm, cpu.norm);
  report(rank, prefix + "loss (rank 0's micro-batches)", loss_error, std::ldexp(1.0, -6));
  report(rank, prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU ZeRO's: " + std::to_string(loss_error));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU ZeRO's: " + std::to_string(norm_error));

  testing::check_shard_and_update(GpuShardStep{model, plugin, mpi.size(), rank, initial, updated, shard_grads, stepped->grad_norm}, zero1.reduced, rank, check, prefix);

  made.value().reset();  // its memory back: the peaks stay
  testing::check_ledger(model, plugin, planner::ParallelLayout{mpi.size(), 1, 1, false}, B, T, gpu_ledger, check, prefix);
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
