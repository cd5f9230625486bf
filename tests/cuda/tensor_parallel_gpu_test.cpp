// Tensor parallelism on one GPU per rank: `mpirun -np 2
// tessera_tensor_parallel_gpu_test` (tools/gpu-check runs it where there are
// 2 or more GPUs; ctest on 2 ranks, skipped without 2 GPUs). The two ranks
// are one tensor-parallel group: each runs one step of the GPU training step
// with tp = 2 over NCCL (cuda/gpt_training.h, src/cuda/tensor_parallel_step.h)
// and one step of the CPU model with tp = 2 over MPI (model/transformer.cpp)
// on the same micro-batch (and again on 2 accumulated micro-batches), from
// the same weights, for a small GPT-2 (2 heads, a tied head over 97 tokens:
// 49 vocabulary rows per rank, one of them padding on rank 1) and a small
// Qwen2 (4 heads on 2 key-value heads, an MLP of 200: 100 per rank); each
// without and with Megatron's sequence parallelism (each rank keeping 37 of
// the micro-batch's 74 rows outside the split layers, against the CPU model's
// sequence-parallel rank, its norms' gradients summed over the group after backward),
// and with sequence parallelism under --tp-comm-overlap (model/sequence_overlap.h:
// the same chunk schedule on NCCL's stream as over MPI, against the CPU
// model's overlapped rank).
//
// Checked, on every rank:
//  - the GPU rank starts from the CPU rank's part, bit for bit;
//  - the loss and the global gradient norm (each parameter counted once over
//    the group) within 2^-6 relative of the CPU's, and this rank's gradients
//    per parameter within 2^-4 in norm: gpt_training_gpu_test.cpp's bf16
//    bounds, for its reasons (both store bf16 and compute in fp32 but round
//    at other points; the all-reduces add the same two bf16 partial sums in
//    rank order on both sides);
//  - the loss and the norm the same on both ranks, and the parameters that
//    are whole on every rank (norms, row-parallel biases, positions) the
//    same bits after the update: had a rank missed an all-reduce, its
//    replicated parameters would drift from the other's;
//  - NCCL's all-reduces in the tensor-parallel group, calls and bytes, equal
//    the CPU model's over MPI plus the one of the gradient norm (8 bytes):
//    the same f/g points, the same three N-float reductions of the
//    vocabulary-parallel cross-entropy, and no gathered logits; and, with
//    sequence parallelism, its all-gathers and reduce-scatters the CPU's, and
//    under --tp-comm-overlap its chunks' sends and recvs the CPU's.
// These bounds have not yet met a GPU.
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine::cuda {
namespace {

using testing::Checker;
using testing::relative;
using testing::report;
using testing::same_on_every_rank;

// The tensor-parallel group's calls of one kind since `before`, and their bytes.
std::pair<int64_t, int64_t> calls_since(const comm::Communicator& group, const comm::CommCounters& before, comm::Collective kind) {
  return {group.counters().calls_of(kind) - before.calls_of(kind), group.counters().bytes_of(kind) - before.bytes_of(kind)};
}

void check_step(const char* name, const planner::Model& model, int64_t micro_batches, bool sequence_parallel, bool comm_overlap, comm::Communicator& mpi,
                comm::Communicator& nccl, Checker& check) {
  const int rank = mpi.rank();
  const int64_t tp = mpi.size(), B = 2, T = 37, micro_tokens = B * T;
  const uint64_t seed = 5;
  // One tensor-parallel group: every rank reads the same micro-batches.
  const auto tokens = testing::random_tokens(micro_batches * micro_tokens, 97, 1), targets = testing::random_tokens(micro_batches * micro_tokens, 97, 2);
  const OptimizerOptions options;
  const std::string prefix = std::string(name) + " tp " + std::to_string(tp) + (sequence_parallel ? " + sp" : "") + (comm_overlap ? " + tp-comm-overlap" : "") +
                             (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ");
  const planner::Model part = planner::tp_rank_model(model, tp);

  // The CPU model's rank of the same group over MPI.
  MemoryLedger cpu_ledger;
  const TpCommunication communication = comm_overlap ? TpCommunication::overlapped : TpCommunication::collectives;
  auto created = Transformer<bf16>::create(model, cpu_ledger, B, T, seed, planner::RecomputeMode::none, FlatStorage{}, &mpi, sequence_parallel, {}, nullptr,
                                           communication);
  check.expect(created.ok(), prefix + "the CPU model" + (created.ok() ? "" : ": " + created.error().message));
  if (!created.ok()) return;
  Transformer<bf16> cpu = std::move(created).value();
  const comm::CommCounters mpi_before = mpi.counters();
  cpu.zero_gradients();
  double cpu_loss = 0;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const int64_t first = micro * micro_tokens;
    cpu_loss = add_micro_batch_loss(cpu_loss, cpu.forward(tokens.data() + first, targets.data() + first), micro_batches);
    cpu.backward(static_cast<float>(micro_batch_gradient_scale(1.0, micro_batches, 1)));
  }
  cpu.reduce_sequence_parallel_gradients();  // as the trainer does after the step's last backward (nothing without sequence parallelism)
  const int64_t numel = cpu.flat_parameters().numel();
  const std::vector<bf16> cpu_grads(cpu.flat_gradients().data(), cpu.flat_gradients().data() + numel);
  double cpu_sum = 0;
  for (const auto& [begin, end] : gradient_norm_runs(part, rank)) cpu_sum += Optimizer<bf16>::sum_of_squares(cpu_grads.data() + begin, end - begin, 1.0);
  const auto [cpu_calls, cpu_bytes] = calls_since(mpi, mpi_before, comm::Collective::all_reduce);
  const auto cpu_gathers = calls_since(mpi, mpi_before, comm::Collective::all_gather);
  const auto cpu_scatters = calls_since(mpi, mpi_before, comm::Collective::reduce_scatter);
  const auto cpu_sends = calls_since(mpi, mpi_before, comm::Collective::send);
  const auto cpu_recvs = calls_since(mpi, mpi_before, comm::Collective::recv);
  check.expect_ok(mpi.all_reduce(&cpu_sum, &cpu_sum, 1, comm::ReduceOp::sum), prefix + "the CPU gradient norm");
  const double cpu_norm = std::sqrt(cpu_sum);

  // The GPU step's rank over NCCL (hybrid_parallel: tensor parallelism, no data parallelism here).
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  const comm::CommCounters nccl_before = nccl.counters();
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, seed, options, GpuDataParallel{nullptr, plugin}, planner::RecomputeMode::none,
                                  GpuTensorParallel{&nccl, sequence_parallel, comm_overlap});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  check.expect(initial.size() == static_cast<size_t>(numel) && std::memcmp(initial.data(), cpu.flat_parameters().data(), initial.size() * sizeof(bf16)) == 0,
               prefix + "the GPU rank starts from the CPU rank's part, bit for bit");
  auto stepped = gpu.step(tokens.data(), targets.data(), micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU tensor-parallel step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> gpu_grads = gpu.gradients(), updated = gpu.parameters();

  check.expect(same_on_every_rank(mpi, std::vector<double>{stepped->loss, stepped->grad_norm}), prefix + "the loss and the norm are the same on every rank");
  std::vector<bf16> replicated;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(part.inventory)) {
    if (part.inventory.tensors[static_cast<size_t>(flat.tensor_index)].tp_split != planner::TpSplit::replicated) continue;
    replicated.insert(replicated.end(), updated.begin() + flat.offset, updated.begin() + flat.offset + flat.numel);
  }
  check.expect(!replicated.empty() && same_on_every_rank(mpi, replicated), prefix + "the replicated parameters stay the same bits on every rank");
  const auto [gpu_calls, gpu_bytes] = calls_since(nccl, nccl_before, comm::Collective::all_reduce);
  check.expect(calls_since(nccl, nccl_before, comm::Collective::all_gather) == cpu_gathers &&
                   calls_since(nccl, nccl_before, comm::Collective::reduce_scatter) == cpu_scatters && (cpu_gathers.first > 0) == sequence_parallel,
               prefix + "NCCL's all-gathers and reduce-scatters are the CPU's (" + std::to_string(cpu_gathers.first) + " and " +
                   std::to_string(cpu_scatters.first) + " calls)");
  check.expect(calls_since(nccl, nccl_before, comm::Collective::send) == cpu_sends &&
                   calls_since(nccl, nccl_before, comm::Collective::recv) == cpu_recvs &&
                   (cpu_sends.first > 0) == comm_overlap,
               prefix + "NCCL's chunk sends and recvs are the CPU's (" + std::to_string(cpu_sends.first) + " sends)");
  check.expect(gpu_calls == cpu_calls + 1 && gpu_bytes == cpu_bytes + 8,
               prefix + "NCCL's tensor-parallel all-reduces (" + std::to_string(gpu_calls) + ", " + std::to_string(gpu_bytes) + " bytes) are the CPU's (" +
                   std::to_string(cpu_calls) + ", " + std::to_string(cpu_bytes) + ") and the norm's");

  const double loss_error = relative(stepped->loss, cpu_loss), norm_error = relative(stepped->grad_norm, cpu_norm);
  report(rank, prefix + "loss", loss_error, std::ldexp(1.0, -6));
  report(rank, prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU's: " + std::to_string(loss_error));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU's: " + std::to_string(norm_error));
  for (size_t p = 0; p < cpu.flat_order().size(); ++p) {
    const planner::FlatParameter& flat = cpu.flat_order()[p];
    double difference = 0, reference = 0;
    for (int64_t i = flat.offset; i < flat.offset + flat.numel; ++i) {
      const double want = static_cast<double>(widen(cpu_grads[static_cast<size_t>(i)]));
      const double d = static_cast<double>(widen(gpu_grads[static_cast<size_t>(i)])) - want;
      difference += d * d;
      reference += want * want;
    }
    const double error = std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30);
    const std::string what = prefix + "rank " + std::to_string(rank) + "'s gradient " + cpu.parameter_names()[p];
    report(rank, what, error, std::ldexp(1.0, -4));
    check.expect(error <= std::ldexp(1.0, -4), what + " within 2^-4 of the CPU's: " + std::to_string(error));
  }
}

void check_one_step(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl,
                    Checker& check) {
  for (const auto& [sequence_parallel, comm_overlap] : {std::pair{false, false}, std::pair{true, false}, std::pair{true, true}}) {
    check_step(name, model, micro_batches, sequence_parallel, comm_overlap, mpi, nccl, check);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("tensor_parallel_gpu_test", tessera::engine::cuda::check_one_step); }
