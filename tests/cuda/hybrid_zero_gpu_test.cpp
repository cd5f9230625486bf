// hybrid_parallel's ZeRO on one GPU per rank: `mpirun -np 4
// tessera_hybrid_zero_gpu_test` (tools/gpu-check runs it where there are 4
// or more GPUs; ctest on 4 ranks, skipped without 4 GPUs). The ranks are tp 2
// × dp (ranks / 2), tensor-parallel ranks fastest (parallel/process_groups.h),
// split from MPI's world for the CPU engine and from NCCL's for the GPU step.
// Each rank runs one step of the GPU training step with tensor parallelism
// over its NCCL tp group and ZeRO of its part over its NCCL dp group
// (cuda/gpt_training.h, src/cuda/zero_shards.h), and one step of the CPU
// engine's hybrid_parallel (the CPU model's tp rank over MPI, its
// DataParallel over MPI's dp group, as trainer.cpp runs them) on its dp
// rank's micro-batch (and again on 2 accumulated micro-batches), from the
// same weights, for ZeRO stage 1 (a 40000-element bucket: several pieces, one
// bucket reduced after backward) and stage 2 (the whole part as the bucket),
// each with the optimizer on the device and with ZeRO-Offload (--cpu-offload:
// each rank's shard of its part on the host, src/cuda/zero_offload.h, against
// the CPU engine's offloaded hybrid_parallel), without and with sequence
// parallelism, on small_models.h's GPT-2 and Qwen2.
//
// Checked, on every rank:
//  - no started call is left pending on either group after the step;
//  - NCCL's reduce-scatters, all-gathers and all-reduces, calls and bytes,
//    equal the CPU engine's on MPI, on the dp group (the same pieces after
//    backward, the shard's norm, the parameters' gather) and on the tp group
//    (the same f/g points, cross-entropy reductions and the norm's sum);
//  - the gradient norm the same on every rank, the updated parameters the
//    same bits on every dp rank of a tp rank;
//  - the loss and the global gradient norm (each parameter counted once over
//    the tp group) within 2^-6 relative of the CPU's, the reduced shard per
//    piece within 2^-4 of the CPU ZeRO-1's and the update within one bf16
//    unit of the CPU optimizer's on the same shard (zero_shard_checks.h,
//    zero_gpu_test.cpp's bounds for its reasons);
//  - the ledger's device peaks of the model states' categories are the
//    planner's estimate of the same hybrid_parallel tp × dp run, and
//    offloaded its host peaks too (zero_shard_checks.h, check_ledger).
// These bounds have not yet met a GPU.
// A plain program under mpirun (gpu_ranks.h): exit 77 on every rank (one
// line) where a rank has no GPU of its own or there are fewer than 4 ranks.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cpu_reference_step.h"
#include "gpu_ranks.h"
#include "zero_shard_checks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine::cuda {
namespace {

using testing::Batch;
using testing::Checker;
using testing::CpuStep;
using testing::GpuShardStep;
using Groups = testing::LayoutGroups;
using testing::relative;
using testing::report;
using testing::same_on_every_rank;

constexpr int64_t kTp = 2, B = 2, T = 37, kMicroTokens = B * T;
constexpr uint64_t kSeed = 5;
constexpr int64_t kSmallBucket = 40000;  // elements: several stage-1 pieces of each rank's part

planner::PluginOptions hybrid_zero(int stage, int64_t reduce_bucket_numel, bool cpu_offload = false) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = stage;
  plugin.reduce_bucket_numel = reduce_bucket_numel;
  plugin.cpu_offload = cpu_offload;
  return plugin;
}

// `cpu`: the CPU engine's step of the same plugin; `zero1`: its ZeRO-1 step (the reduced shard).
void check_one_case(const std::string& prefix, const planner::Model& model, const planner::PluginOptions& plugin, bool sequence_parallel, const Batch& batch,
                    const CpuStep& cpu, const CpuStep& zero1, comm::Communicator& world, Groups& groups, Checker& check) {
  if (!cpu.ok || !zero1.ok) return;
  comm::Communicator &dp = *groups.nccl.data, &tp = *groups.nccl.tensor;
  const comm::CommCounters dp_before = dp.counters(), tp_before = tp.counters();
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, kSeed, OptimizerOptions{}, GpuDataParallel{&dp, plugin}, planner::RecomputeMode::none,
                                  GpuTensorParallel{&tp, sequence_parallel});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  auto stepped = gpu.step(batch.tokens.data(), batch.targets.data(), batch.micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU hybrid ZeRO step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> shard_grads = gpu.gradients(), updated = gpu.parameters();
  check.expect(dp.started_calls() == 0 && tp.started_calls() == 0, prefix + "every started call finished within the step");

  check.expect(same_on_every_rank(*groups.mpi.data, updated), prefix + "the updated part is the same bits on every data-parallel rank");
  check.expect(same_on_every_rank(world, std::vector<double>{stepped->grad_norm}), prefix + "the gradient norm is the same on every rank");
  testing::check_same_calls("dp", dp.counters().since(dp_before), cpu.moved, check, prefix);
  testing::check_same_calls("tp", tp.counters().since(tp_before), cpu.tensor_moved, check, prefix);
  const int rank = world.rank();
  const double loss_error = relative(stepped->loss, cpu.loss), norm_error = relative(stepped->grad_norm, cpu.norm);
  report(rank, prefix + "loss (rank 0's micro-batches)", loss_error, std::ldexp(1.0, -6));
  report(rank, prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU engine's: " + std::to_string(loss_error));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU engine's: " + std::to_string(norm_error));

  const planner::Model part = planner::tp_rank_model(model, kTp);
  testing::check_shard_and_update(GpuShardStep{part, plugin, dp.size(), dp.rank(), initial, updated, shard_grads, stepped->grad_norm}, zero1.reduced, rank, check, prefix);

  made.value().reset();  // its memory back: the peaks stay
  testing::check_ledger(model, plugin, planner::ParallelLayout{dp.size(), kTp, 1, sequence_parallel}, B, T, gpu_ledger, check, prefix);
}

void check_model(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& world, Groups& groups, Checker& check) {
  // The tensor-parallel ranks of a data-parallel rank read the same micro-batches.
  const auto seed = static_cast<uint32_t>(groups.mpi.coordinates.dp_rank);
  Batch batch{testing::random_tokens(static_cast<size_t>(micro_batches * kMicroTokens), 97, 1 + 2 * seed),
              testing::random_tokens(static_cast<size_t>(micro_batches * kMicroTokens), 97, 2 + 2 * seed), micro_batches};
  comm::Communicator& mpi_dp = *groups.mpi.data;
  const int64_t padded = planner::padded_flat_numel(planner::tp_rank_model(model, kTp).parameter_count, mpi_dp.size());
  for (const bool sequence_parallel : {false, true}) {
    const std::string run = std::string(name) + " tp " + std::to_string(kTp) + " × dp " + std::to_string(mpi_dp.size()) + (sequence_parallel ? " + sp" : "") +
                            (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ");
    const testing::CpuTensorParallel tensor{groups.mpi.tensor.get(), sequence_parallel};
    const CpuStep zero1 = testing::cpu_reference_step(model, hybrid_zero(1, kSmallBucket), batch, B, T, kSeed, mpi_dp, check, run + "zero1 ", tensor);
    for (const bool offload : {false, true}) {
      const std::string label = offload ? " offload " : " ";
      const planner::PluginOptions stage1 = hybrid_zero(1, kSmallBucket, offload), stage2 = hybrid_zero(2, padded, offload);
      const CpuStep cpu1 = offload ? testing::cpu_reference_step(model, stage1, batch, B, T, kSeed, mpi_dp, check, run + "zero1" + label, tensor) : zero1;
      const CpuStep cpu2 = testing::cpu_reference_step(model, stage2, batch, B, T, kSeed, mpi_dp, check, run + "zero2" + label, tensor);
      check_one_case(run + "zero1" + label, model, stage1, sequence_parallel, batch, cpu1, zero1, world, groups, check);
      check_one_case(run + "zero2" + label, model, stage2, sequence_parallel, batch, cpu2, zero1, world, groups, check);
    }
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() {
  using namespace tessera::engine;
  const auto layout_of = [](int ranks) { return tessera::planner::ParallelLayout{ranks / cuda::kTp, cuda::kTp, 1, false}; };
  return cuda::testing::check_small_models_on_layout("hybrid_zero_gpu_test", layout_of, "an even number of", cuda::check_model, 4);
}
