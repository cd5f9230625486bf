// Context parallelism on one GPU per rank: `mpirun -np 2
// tessera_context_parallel_gpu_test` (tools/gpu-check on 2 GPUs; ctest on 2
// ranks, skipped without 2 GPUs). The two ranks are one context group (cp 2,
// dp 1, hybrid_parallel at ZeRO stage 0: DDP over the dp × cp ranks): each
// holds its two chunks of the same B sequences of S tokens
// (planner/context_split.h) and runs one step of the GPU training step (the
// GPU ring over NCCL, cuda/ring_attention.h) and one of the CPU engine's
// (the CPU ring over MPI, model/ring_attention.h) from the same weights, for
// a small GPT-2 (learned positions) and a small Qwen2 (RoPE, grouped-query
// heads), of one micro-batch and of 2 accumulated ones.
//
// Checked, on every rank: this rank's loss and the global gradient norm
// within 2^-6 relative of the CPU engine's, the reduced gradients per
// parameter within 2^-4 in norm, and the same bits on every rank
// (ddp_gpu_test.cpp's bounds, for its reasons: both store bf16 and compute
// in fp32 but round at other points; the ring adds one rounding of the
// merged output per block's partial, ring_attention_gpu_test.cpp); NCCL's
// reductions (calls and bytes) equal the CPU's on MPI, and its send_recvs,
// the ring's, equal the CPU ring's (planner::ring_sends per layer and
// micro-batch, each one K/V block: planner::ring_block_elements).
// These bounds have not yet met a GPU.
#include <cmath>
#include <string>
#include <vector>

#include "cpu_reference_step.h"
#include "tessera/engine/data.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine::cuda {
namespace {

using testing::Checker;

void check_one_step(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl,
                    Checker& check) {
  const int rank = mpi.rank();
  const int64_t B = 2, S = 48, cp = mpi.size(), T = S / cp;  // chunks of 12 tokens: a multiple of 4 (gpt_training.cpp's alignment rule)
  const uint64_t seed = 5;
  const planner::ContextSplit split{cp, rank};
  const std::string prefix = std::string(name) + (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ");
  // The same whole sequences on every rank (one data-parallel rank), each keeping its chunks.
  const testing::Batch whole = testing::rank_batch(0, micro_batches, B * S);
  testing::Batch local{std::vector<int32_t>(static_cast<size_t>(micro_batches * B * T)), {}, micro_batches};
  local.targets = local.tokens;
  take_context_chunks(local.tokens.data(), whole.tokens.data(), micro_batches * B, S, split);
  take_context_chunks(local.targets.data(), whole.targets.data(), micro_batches * B, S, split);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;

  const testing::CpuStep cpu = testing::cpu_reference_step(model, plugin, local, B, T, seed, mpi, check, prefix, {}, &mpi);
  if (!cpu.ok) return;

  const comm::CommCounters nccl_before = nccl.counters();
  MemoryLedger ledger;
  auto made = GptTraining::create(model, ledger, B, S, seed, OptimizerOptions{}, GpuDataParallel{&nccl, plugin}, planner::RecomputeMode::none, {}, {}, 0,
                                  GpuContextParallel{&nccl});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  auto stepped = made.value()->step(local.tokens.data(), local.targets.data(), micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU step under cp " + std::to_string(cp) + ": " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const comm::CommCounters moved = nccl.counters().since(nccl_before);
  testing::check_against_cpu_step(prefix, "context parallelism", stepped.value(), moved, cpu, rank, mpi.size(), check);

  const std::vector<bf16> gradients = made.value()->gradients();
  check.expect(testing::same_on_every_rank(mpi, gradients), prefix + "the reduced gradients are the same bits on every rank");
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(model.inventory)) {
    const std::string what = prefix + "reduced gradient " + model.inventory.tensors[static_cast<size_t>(flat.tensor_index)].name;
    const double error = testing::parameter_error(gradients, cpu.reduced, flat);
    testing::report(rank, what, error, std::ldexp(1.0, -4));
    check.expect(error <= std::ldexp(1.0, -4), what + " within 2^-4 of the CPU engine's: " + std::to_string(error));
  }
  const planner::RingSends sends = planner::ring_sends(cp, planner::RecomputeMode::none);
  const int64_t block_bytes = planner::ring_block_elements(B, T, model.config.kv_width(), 1) * static_cast<int64_t>(sizeof(bf16));
  testing::check_ring_traffic(prefix, moved, cpu.moved, micro_batches * model.config.num_layers * (sends.forward + sends.backward), block_bytes, check);
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() {
  return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("context_parallel_gpu_test", tessera::engine::cuda::check_one_step);
}
