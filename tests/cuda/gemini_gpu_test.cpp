// Gemini on GPUs: `tessera_gemini_gpu_test` on one GPU, `mpirun -np N
// tessera_gemini_gpu_test` on N (tools/gpu-check runs it on one GPU and with
// N = the GPUs where there are 2 or more; ctest on 1 and 2 ranks, skipped
// without the GPUs). Each rank runs one step of the GPU training step under
// Gemini (cuda/gpt_training.h, src/cuda/gemini_shards.h; over NCCL on 2 or
// more ranks) and one step of the CPU engine's Gemini over MPI
// (parallel/gemini.h) on the same rank's micro-batch (and again on 2
// accumulated micro-batches), in the same chunks of 40000 elements (several
// per layer, some spanning two), under the `cuda` placement, the `cpu`
// placement (shards pinned on the host, the optimizer on the host),
// `static` with shard_param_frac 0.5 (chunks kept gathered from forward to
// backward), and two `static` placements that split the chunks: the states
// of the first half of the chunks on the host (offload_optim_frac_for), and
// every chunk's states on the host with its shards on the device
// (offload_optim_frac 1): those chunks trade gradients and weights through
// host copies (device/gemini_device_chunks.h), on small_models.h's GPT-2 (tied head) and Qwen2.
//
// Checked, on every rank:
//  - this rank's loss and the global gradient norm within 2^-6 relative of
//    the CPU Gemini's (ddp_gpu_test.cpp's bounds, for its reasons);
//  - on 2 or more ranks, NCCL's all-gathers, reduce-scatters and all-reduces
//    (calls and bytes) equal the CPU Gemini's on MPI: the same chunks
//    gathered and reduced at the same layers (planner::GeminiGathering);
//  - the reduced gradient slots, per piece, within 2^-4 in norm of the CPU
//    DDP's reduced gradients of the same elements;
//  - the update against the CPU optimizer of this rank's slots applied to
//    the GPU's reduced gradients, within one bf16 unit of each weight;
//  - the ledger's peaks against the planner's estimate of the same run per
//    category: the device's parameters, gradients, master weights and
//    optimizer states within 512 bytes a block (the caching allocator's
//    rounding), the host's master weights and states exactly and its 16-bit
//    shards (and host copies, under gradients) rounded up to the pinned
//    allocator's powers of two, and
//    chunk_buffers at most one shard and the rounding above the planner's
//    peak (device/gemini_device_chunks.h: the moment of a gather).
// These bounds have not yet met a GPU. A plain program under mpirun
// (gpu_ranks.h): exit 77 on every rank (one line) where a rank has no GPU of its own.
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
#include "tessera/engine/parallel/gemini_chunks.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine::cuda {
namespace {

using testing::Batch;
using testing::Checker;
using testing::CpuStep;

constexpr int64_t B = 2, T = 37, kMicroTokens = B * T;
constexpr uint64_t kSeed = 5;
constexpr int64_t kChunk = 40000;  // elements: several chunks per layer, a multiple of 2

planner::PluginOptions gemini_plugin(planner::GeminiPlacement placement, double shard_param_frac = 1, double offload_optim_frac = 0) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::gemini;
  plugin.gemini.placement_policy = placement;
  plugin.gemini.chunk_size = kChunk;
  plugin.gemini.shard_param_frac = shard_param_frac;
  plugin.gemini.offload_optim_frac = offload_optim_frac;
  return plugin;
}

// The ledger's peaks against the planner's estimate of the same run.
void check_ledger(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, int64_t micro_batches, const MemoryLedger& ledger,
                  Checker& check, const std::string& prefix) {
  const std::optional<planner::RankMemory> estimated = testing::planned_rank_memory(model, plugin, ranks, B, T, micro_batches, check, prefix);
  if (!estimated) return;
  const planner::RankMemory& row = *estimated;
  const GeminiChunkPlan plan = gemini_chunk_plan(model, plugin.gemini, ranks);
  const int64_t blocks = 2 * static_cast<int64_t>(plan.chunks.size());
  int64_t largest_shard = 0;
  for (const GeminiChunk& c : plan.chunks) largest_shard = std::max(largest_shard, 2 * c.shard);
  const auto within = [&](MemoryCategory category, int64_t slack) {
    const int64_t planned = row.bytes[category].device, booked = ledger.peak(category, MemorySpace::device);
    check.expect(booked >= planned - slack && booked <= planned + slack,
                 prefix + "the ledger's " + std::string(to_string(category)) + " " + std::to_string(booked) + " bytes are the planner's " + std::to_string(planned));
  };
  within(MemoryCategory::parameters, 512 * blocks);
  within(MemoryCategory::gradients, 512 * blocks);
  within(MemoryCategory::master_weights, 512);
  within(MemoryCategory::optimizer_states, 2 * 512);
  const int64_t planned = row.bytes[MemoryCategory::chunk_buffers].device, booked = ledger.peak(MemoryCategory::chunk_buffers, MemorySpace::device);
  check.expect(booked >= planned - 512 * blocks && booked <= planned + largest_shard + 512 * blocks,
               prefix + "the ledger's chunk_buffers " + std::to_string(booked) + " bytes are the planner's " + std::to_string(planned) + " and one shard at most");
  // The pinned shards and host copies at the pinned allocator's powers of two, as the planner counts them.
  for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::master_weights,
                                        MemoryCategory::optimizer_states}) {
    check.expect(ledger.peak(category, MemorySpace::host) == row.bytes[category].host, prefix + "the ledger's host " + std::string(to_string(category)));
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
  const std::vector<bf16> initial = gpu.parameters();  // this rank's weight slots
  auto stepped = gpu.step(batch.tokens.data(), batch.targets.data(), batch.micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU Gemini step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> slots = gpu.gradients(), updated = gpu.parameters();
  const comm::CommCounters moved = nccl.counters().since(nccl_before);

  testing::check_against_cpu_step(prefix, "Gemini", stepped.value(), moved, cpu, rank, ranks, check);
  const planner::OptimizerLayout layout = planner::optimizer_layout(model, plugin, ranks, rank);
  testing::check_reduced_pieces(prefix, "slots", model, layout, ddp.reduced, slots, rank, check);
  if (static_cast<int64_t>(slots.size()) != layout.shard_numel) return;

  // The update: the CPU optimizer of these slots on the GPU's reduced gradients, from the same weights.
  const std::vector<bf16> want = testing::cpu_optimizer_update(model, layout, initial, slots, stepped->grad_norm, check, prefix);
  testing::check_updated_pieces(prefix, "slots", layout, updated, want, rank, check);

  made.value().reset();  // its memory back: the peaks stay
  check_ledger(model, plugin, ranks, batch.micro_batches, gpu_ledger, check, prefix);
}

void check_model(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const Batch batch = testing::rank_batch(mpi.rank(), micro_batches, kMicroTokens);
  const std::string accumulated = micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ";
  const CpuStep ddp = testing::cpu_ddp_step(model, batch, B, T, kSeed, mpi, check, std::string(name) + " ddp" + accumulated);
  const planner::ChunkLayout layout = planner::pack_chunks(model.inventory, kChunk, mpi.size());
  const double half_the_states = planner::offload_optim_frac_for(layout, layout.num_chunks() / 2);
  for (const auto& [label, plugin] : {std::pair{"gemini cuda", gemini_plugin(planner::GeminiPlacement::cuda)},
                                      std::pair{"gemini cpu", gemini_plugin(planner::GeminiPlacement::cpu)},
                                      std::pair{"gemini static kept gathered", gemini_plugin(planner::GeminiPlacement::static_placement, 0.5)},
                                      std::pair{"gemini static half the states on the host", gemini_plugin(planner::GeminiPlacement::static_placement, 1, half_the_states)},
                                      std::pair{"gemini static states on the host", gemini_plugin(planner::GeminiPlacement::static_placement, 1, 1)}}) {
    const std::string prefix = std::string(name) + " " + label + accumulated;
    const CpuStep cpu = testing::cpu_reference_step(model, plugin, batch, B, T, kSeed, mpi, check, prefix);
    check_one_case(prefix, model, plugin, batch, cpu, ddp, mpi, nccl, check);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("gemini_gpu_test", tessera::engine::cuda::check_model, 1); }
