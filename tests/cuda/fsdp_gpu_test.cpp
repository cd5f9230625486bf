// FSDP on GPUs: `tessera_fsdp_gpu_test` on one GPU, `mpirun -np N
// tessera_fsdp_gpu_test` on N (tools/gpu-check runs it on one GPU and with
// N = the GPUs where there are 2 or more; ctest on 1, 2 and 3 ranks, skipped
// without the GPUs). Each rank runs one step of the GPU training step under
// torch_fsdp (cuda/gpt_training.h, src/cuda/fsdp_shards.h; over NCCL on 2
// or more ranks) and one step of the CPU engine's FSDP over MPI
// (parallel/fsdp.h) on the same rank's micro-batch (and again on 2
// accumulated micro-batches), under full_shard and shard_grad_op, on
// small_models.h's GPT-2 (tied head) and Qwen2; on 2 or more ranks and one
// micro-batch also with --cpu-offload (the shards in pinned host memory, the
// CPU engine's AdamW on the host; planner/fsdp_offload.h), against the CPU
// FSDP offloaded likewise.
//
// Checked, on every rank:
//  - this rank's loss and the global gradient norm within 2^-6 relative of
//    the CPU FSDP's (ddp_gpu_test.cpp's bounds, for its reasons);
//  - on 2 or more ranks, NCCL's all-gathers, reduce-scatters and all-reduces
//    (calls and bytes) equal the CPU FSDP's on MPI: the same units gathered
//    and reduced at the same layers (parallel/fsdp_schedule.h), and no
//    started reduce-scatter left pending after the step;
//  - the reduced fp32 gradient shard, per piece (planner::fsdp_pieces),
//    within 2^-4 in norm of the CPU DDP's reduced gradients of the same elements;
//  - the update against the CPU optimizer of this rank's shard (the CPU
//    FSDP's Optimizer<float> over the same pieces) applied to the GPU's
//    reduced gradients, within one bf16 unit of each weight;
//  - the ledger's device peaks against the planner's estimate of the same
//    run per category (add_fsdp_states): parameters, gradients, optimizer
//    states, chunk_buffers and comm_buffers, each block rounded up to the
//    caching allocator's 512 bytes (device/fsdp_device_units.h), no master weights.
// These bounds have not yet met a GPU. A plain program under mpirun
// (gpu_ranks.h): exit 77 on every rank (one line) where a rank has no GPU of its own.
#include <string>
#include <vector>

#include "cpu_reference_step.h"
#include "gpu_ranks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/model/initialization.h"
#include "tessera/engine/shard_values.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine::cuda {
namespace {

using testing::Batch;
using testing::Checker;
using testing::CpuStep;

constexpr int64_t B = 2, T = 37, kMicroTokens = B * T;
constexpr uint64_t kSeed = 5;

planner::PluginOptions fsdp_plugin(planner::FsdpStrategy strategy, bool offload) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_fsdp;
  plugin.fsdp_strategy = strategy;
  plugin.cpu_offload = offload;
  return plugin;
}

// The ledger's peaks against the planner's estimate of the same run: each
// category's blocks rounded up to 512 bytes (the shards one each, AdamW's
// states two, the root and two blocks gathered or every unit, the root's and
// one block's gradient; offloaded, one unit's shard each way and no states),
// and its host bytes.
void check_ledger(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, int64_t micro_batches, const MemoryLedger& ledger,
                  Checker& check, const std::string& prefix) {
  const std::optional<planner::RankMemory> estimated = testing::planned_rank_memory(model, plugin, ranks, B, T, micro_batches, check, prefix);
  if (!estimated) return;
  const planner::RankMemory& row = *estimated;
  const auto units = static_cast<int64_t>(model.config.num_layers) + 1;
  const int64_t gathered = plugin.fsdp_strategy == planner::FsdpStrategy::full_shard ? 3 : units;
  for (const auto& [category, blocks] : {std::pair{MemoryCategory::parameters, int64_t{1}}, std::pair{MemoryCategory::gradients, int64_t{1}},
                                         std::pair{MemoryCategory::optimizer_states, int64_t{plugin.cpu_offload ? 0 : 2}},
                                         std::pair{MemoryCategory::master_weights, int64_t{0}},
                                         std::pair{MemoryCategory::chunk_buffers, gathered}, std::pair{MemoryCategory::comm_buffers, int64_t{2}}}) {
    const int64_t planned = row.bytes[category].device, booked = ledger.peak(category, MemorySpace::device);
    check.expect(booked >= planned && booked <= planned + 512 * blocks,
                 prefix + "the ledger's " + std::string(to_string(category)) + " " + std::to_string(booked) + " bytes are the planner's " + std::to_string(planned));
  }
  // Offloaded, the pinned shards at the pinned allocator's powers of two and the host AdamW's states, as the planner counts them.
  for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::optimizer_states}) {
    const int64_t planned = row.bytes[category].host, booked = ledger.peak(category, MemorySpace::host);
    check.expect(booked == planned, prefix + "the ledger's host " + std::string(to_string(category)) + " " + std::to_string(booked) + " bytes are the planner's " +
                                        std::to_string(planned));
  }
}

void check_one_case(const std::string& prefix, const planner::Model& model, const planner::PluginOptions& plugin, const Batch& batch, const CpuStep& cpu,
                    const CpuStep& ddp, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const int rank = mpi.rank(), ranks = mpi.size();
  if (!cpu.ok || !ddp.ok) return;
  const comm::CommCounters nccl_before = nccl.counters();
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, kSeed, OptimizerOptions{}, GpuDataParallel{ranks > 1 ? &nccl : nullptr, plugin});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  auto stepped = gpu.step(batch.tokens.data(), batch.targets.data(), batch.micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU FSDP step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> shard_grads = gpu.gradients(), updated = gpu.parameters();
  const comm::CommCounters moved = nccl.counters().since(nccl_before);
  check.expect(nccl.started_calls() == 0, prefix + "every started reduce-scatter finished within the step");

  testing::check_against_cpu_step(prefix, "FSDP", stepped.value(), moved, cpu, rank, ranks, check);
  const planner::OptimizerLayout layout = planner::optimizer_layout(model, plugin, ranks, rank);
  testing::check_reduced_pieces(prefix, "shard", model, layout, ddp.reduced, shard_grads, rank, check);
  if (static_cast<int64_t>(shard_grads.size()) != layout.shard_numel) return;

  // The update: the CPU FSDP's optimizer of this shard, from the same fp32 weights, on the GPU's reduced gradients.
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  std::vector<float> flat(static_cast<size_t>(model.parameter_count)), weights(static_cast<size_t>(layout.shard_numel), 0.0f);
  for_each_initial_value(model, kSeed, [&flat](int64_t i, double value) { flat[static_cast<size_t>(i)] = static_cast<float>(value); });
  flat_values_to_shard(layout.pieces, order, flat.data(), weights.data());
  const std::vector<float> want = testing::cpu_optimizer_update(model, layout, weights, shard_grads, stepped->grad_norm, check, prefix);
  testing::check_updated_pieces(prefix, "shard", layout, updated, want, rank, check);

  made.value().reset();  // its memory back: the peaks stay
  check_ledger(model, plugin, ranks, batch.micro_batches, gpu_ledger, check, prefix);
}

void check_model(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const Batch batch = testing::rank_batch(mpi.rank(), micro_batches, kMicroTokens);
  const std::string accumulated = micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ";
  const CpuStep ddp = testing::cpu_ddp_step(model, batch, B, T, kSeed, mpi, check, std::string(name) + " ddp" + accumulated);
  // Offloaded FSDP shards over 2 or more ranks and steps one micro-batch at a time (planner::check_fsdp_offload_accumulation).
  const bool offloads = mpi.size() >= 2 && micro_batches == 1;
  for (const auto& [label, strategy] : {std::pair{"fsdp full_shard", planner::FsdpStrategy::full_shard},
                                        std::pair{"fsdp shard_grad_op", planner::FsdpStrategy::shard_grad_op}}) {
    for (const bool offload : {false, true}) {
      if (offload && !offloads) continue;
      const std::string prefix = std::string(name) + " " + label + (offload ? " offloaded" : "") + accumulated;
      const planner::PluginOptions plugin = fsdp_plugin(strategy, offload);
      const CpuStep cpu = testing::cpu_reference_step(model, plugin, batch, B, T, kSeed, mpi, check, prefix);
      check_one_case(prefix, model, plugin, batch, cpu, ddp, mpi, nccl, check);
    }
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("fsdp_gpu_test", tessera::engine::cuda::check_model, 1); }
