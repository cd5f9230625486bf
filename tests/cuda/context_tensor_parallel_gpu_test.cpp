// Context parallelism beside tensor parallelism on one GPU per rank: `mpirun
// -np 4 tessera_context_tensor_parallel_gpu_test` (tools/gpu-check where
// there are 4 or more GPUs; ctest on 4 ranks, skipped without 4 GPUs). The
// ranks are tp 2 × cp 2 × dp (ranks / 4), ordered tp, cp, dp as the planner's
// groups are (parallel/process_groups.h), split from MPI's world for the CPU
// engine and from NCCL's for the GPU step; hybrid_parallel at ZeRO stage 0
// (DDP over the dp × cp ranks of each tp rank). Each rank holds its two
// chunks of its dp rank's B sequences of S tokens (planner/context_split.h)
// and runs one step of the GPU training step (its tp rank's part, the GPU
// ring over its NCCL context group passing K/V blocks of its own heads) and
// one of the CPU engine's (the CPU model's tp rank over MPI, the CPU ring
// over MPI's context group) from the same weights, for small_models.h's
// GPT-2 and Qwen2, of one micro-batch and of 2 accumulated ones, without and
// with sequence parallelism.
//
// Checked, on every rank:
//  - this rank's loss and the global gradient norm within 2^-6 relative of
//    the CPU engine's, and its reduced gradients per parameter within 2^-4
//    in norm (context_parallel_gpu_test.cpp's bounds, for its reasons);
//  - the reduced gradients the same bits on every dp × cp rank of a tp rank;
//  - NCCL's calls equal the CPU engine's on MPI, group by group: the dp × cp
//    group's reductions, the tp group's (the f/g points, the
//    cross-entropy's, the norm's) and the context group's ring: its sends
//    and recvs planner::ring_sends per layer and micro-batch, each one K/V
//    block of this tp rank's heads (planner::ring_block_elements, bf16).
//  - no started call left pending on any group after the step;
//  - the ledger's device peaks of the model states' categories and
//    comm_buffers the planner's estimate of the same run (zero_shard_checks.h's
//    check_ledger; DDP's buckets are views of the gradients on GPUs).
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
#include "tessera/engine/data.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine::cuda {
namespace {

using testing::Batch;
using testing::Checker;
using testing::CpuStep;
using Groups = testing::LayoutGroups;

constexpr int64_t kTp = 2, kCp = 2, B = 2, S = 48, T = S / kCp;  // chunks of 12 tokens: a multiple of 4 (gpt_training.cpp's alignment rule)
constexpr uint64_t kSeed = 5;

// This rank's chunks of its dp rank's micro-batches (the tp and cp ranks of a dp rank read the same sequences).
Batch local_batch(const Groups& groups, int64_t micro_batches) {
  const Batch whole = testing::rank_batch(static_cast<int>(groups.mpi.coordinates.dp_rank), micro_batches, B * S);
  const planner::ContextSplit split{kCp, groups.mpi.coordinates.cp_rank};
  Batch local{std::vector<int32_t>(static_cast<size_t>(micro_batches * B * T)), {}, micro_batches};
  local.targets = local.tokens;
  take_context_chunks(local.tokens.data(), whole.tokens.data(), micro_batches * B, S, split);
  take_context_chunks(local.targets.data(), whole.targets.data(), micro_batches * B, S, split);
  return local;
}

void check_model(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& world, Groups& groups, Checker& check) {
  const Batch batch = local_batch(groups, micro_batches);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  comm::Communicator &mpi_data = *groups.mpi.data_context, &mpi_context = *groups.mpi.context;
  comm::Communicator &data = *groups.nccl.data_context, &tensor = *groups.nccl.tensor, &context = *groups.nccl.context;
  for (const bool sequence_parallel : {false, true}) {
    const std::string prefix = std::string(name) + " tp 2 × cp 2 × dp " + std::to_string(mpi_data.size() / kCp) + (sequence_parallel ? " + sp" : "") +
                               (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ");
    const comm::CommCounters ring_before = mpi_context.counters();
    const CpuStep cpu = testing::cpu_reference_step(model, plugin, batch, B, T, kSeed, mpi_data, check, prefix,
                                                    testing::CpuTensorParallel{groups.mpi.tensor.get(), sequence_parallel}, &mpi_context);
    if (!cpu.ok) continue;
    const comm::CommCounters cpu_ring = mpi_context.counters().since(ring_before);

    const comm::CommCounters data_before = data.counters(), tensor_before = tensor.counters(), context_before = context.counters();
    MemoryLedger ledger;
    auto made = GptTraining::create(model, ledger, B, S, kSeed, OptimizerOptions{}, GpuDataParallel{&data, plugin}, planner::RecomputeMode::none,
                                    GpuTensorParallel{&tensor, sequence_parallel}, {}, 0, GpuContextParallel{&context});
    check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
    if (!made.ok()) continue;
    auto stepped = made.value()->step(batch.tokens.data(), batch.targets.data(), micro_batches);
    check.expect(stepped.ok() && stepped->updated, prefix + "one GPU step: " + (stepped.ok() ? "" : stepped.error().message));
    if (!stepped.ok()) continue;
    check.expect(data.started_calls() == 0 && tensor.started_calls() == 0 && context.started_calls() == 0,
                 prefix + "every started call finished within the step");
    testing::check_against_cpu_step(prefix, "tp × cp", stepped.value(), data.counters().since(data_before), cpu, world.rank(), world.size(), check);
    testing::check_same_calls("tp", tensor.counters().since(tensor_before), cpu.tensor_moved, check, prefix);
    const planner::RingSends sends = planner::ring_sends(kCp, planner::RecomputeMode::none);
    const int64_t block_bytes = planner::ring_block_elements(B, T, model.config.kv_width(), kTp) * static_cast<int64_t>(sizeof(bf16));
    testing::check_ring_traffic(prefix, context.counters().since(context_before), cpu_ring,
                                micro_batches * model.config.num_layers * (sends.forward + sends.backward), block_bytes, check);

    const std::vector<bf16> gradients = made.value()->gradients();
    check.expect(testing::same_on_every_rank(mpi_data, gradients), prefix + "the reduced gradients are the same bits on every dp × cp rank");
    const planner::Model part = planner::tp_rank_model(model, kTp);
    for (const planner::FlatParameter& flat : planner::flat_parameter_order(part.inventory)) {
      const std::string what = prefix + "reduced gradient " + part.inventory.tensors[static_cast<size_t>(flat.tensor_index)].name;
      const double error = testing::parameter_error(gradients, cpu.reduced, flat);
      testing::report(world.rank(), what, error, std::ldexp(1.0, -4));
      check.expect(error <= std::ldexp(1.0, -4), what + " within 2^-4 of the CPU engine's: " + std::to_string(error));
    }
    made.value().reset();  // its memory back: the peaks stay
    planner::PluginOptions planned = plugin;
    planned.gradient_as_bucket_view = true;
    testing::check_ledger(model, planned, planner::ParallelLayout{mpi_data.size() / kCp, kTp, 1, sequence_parallel, kCp}, B, S, ledger, check, prefix);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() {
  using namespace tessera::engine;
  const auto layout_of = [](int ranks) {
    return tessera::planner::ParallelLayout{ranks / (cuda::kTp * cuda::kCp), cuda::kTp, 1, false, cuda::kCp};
  };
  return cuda::testing::check_small_models_on_layout("context_tensor_parallel_gpu_test", layout_of, "a multiple of 4", cuda::check_model, 4);
}
