// Data-parallel training on one GPU per rank: `mpirun -np N
// tessera_ddp_gpu_test` (tools/gpu-check runs it with N = the GPUs where
// there are 2 or more; ctest on 2 ranks, skipped without 2 GPUs). Each rank
// runs one step of the GPU training step with DDP over NCCL
// (cuda/gpt_training.h) and one step of the CPU engine's DDP over MPI
// (parallel/data_parallel.h, torch_ddp) on the same rank's micro-batch (and
// again on 2 accumulated micro-batches), from
// the same weights, with the same buckets (8 KiB: several per layer), for a
// small GPT-2 and a small Qwen2 (tests/cuda/gpt_training_gpu_test.cpp's).
//
// Checked, on every rank:
//  - the reduced gradients, the weights after the update and the gradient
//    norm are the same bits on every rank (the rank-order all-reduce, comm/nccl.h);
//  - the GPU's reduced gradients against the CPU DDP's, per parameter within
//    2^-4 in norm; this rank's loss and the global gradient norm within 2^-6
//    relative: gpt_training_gpu_test.cpp's bounds, for the same reasons (both
//    store bf16 and compute in fp32 but round at other points). The reduced
//    sum adds N bf16 gradients in the same order on both sides, so it adds no
//    error of its own beyond what each rank's gradient carries;
//  - the update against the CPU optimizer applied to the GPU's reduced
//    gradients, within one bf16 unit of each weight (2^-7 relative): had the
//    optimizer read a gradient before its bucket's sum arrived, the update of
//    that element would follow this rank's own gradient instead, and the
//    ranks' weights would differ;
//  - the NCCL communicator's all-reduce calls and bytes equal the CPU DDP's on
//    MPI (the same bucket plan, parallel/ddp_buckets.h); with 2 micro-batches,
//    a GPU step that reduced in the first backward too would make twice the calls.
// These bounds have not yet met a GPU.
// A plain program under mpirun (gpu_ranks.h): every rank makes every call
// whatever fails, and the ranks agree on the verdict. Exit 77 on every rank
// (one line) where a rank has no GPU of its own.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/strategy.h"

namespace tessera::engine::cuda {
namespace {

using testing::Checker;
using testing::relative;
using testing::report;
using testing::same_on_every_rank;

constexpr int64_t kBucketBytes = 8 << 10;

// One step of `micro_batches` accumulated micro-batches on each rank.
void check_one_step(const char* name, const planner::Model& model, int64_t micro_batches, comm::Communicator& mpi, comm::Communicator& nccl,
                    Checker& check) {
  const int rank = mpi.rank();
  const int64_t B = 2, T = 37, micro_tokens = B * T;
  const uint64_t seed = 5;
  // Each rank's own micro-batches of the global batch.
  const auto tokens = testing::random_tokens(micro_batches * micro_tokens, 97, 1 + 2 * static_cast<uint32_t>(rank)),
             targets = testing::random_tokens(micro_batches * micro_tokens, 97, 2 + 2 * static_cast<uint32_t>(rank));
  const OptimizerOptions options;
  const std::string prefix = std::string(name) + (micro_batches > 1 ? ", " + std::to_string(micro_batches) + " micro-batches " : " ");

  // The CPU engine's DDP over MPI: forward, backward with its buckets, the reduced gradients.
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_ddp;
  plugin.bucket_bytes = kBucketBytes;
  auto strategy = make_parallel_strategy<bf16>(mpi, plugin, model);
  MemoryLedger cpu_ledger;
  auto created = Transformer<bf16>::create(model, cpu_ledger, B, T, seed, planner::RecomputeMode::none, strategy->storage());
  check.expect(created.ok(), prefix + "the CPU model");
  if (!created.ok()) return;
  Transformer<bf16> cpu = std::move(created).value();
  check.expect_ok(strategy->attach(cpu_ledger, cpu, decay_mask(cpu.parameter_shapes()), options), prefix + "the CPU DDP");
  const comm::CommCounters mpi_before = mpi.counters();
  // As the CPU trainer runs a step (gradient_accumulation.h): only the last backward reduces.
  strategy->zero_gradients();
  double cpu_loss = 0;
  for (int64_t micro = 0; micro < micro_batches; ++micro) {
    const int64_t first = micro * micro_tokens;
    cpu_loss = add_micro_batch_loss(cpu_loss, cpu.forward(tokens.data() + first, targets.data() + first), micro_batches);
    strategy->prepare_backward(reduces_in_backward(micro, micro_batches));
    cpu.backward(static_cast<float>(micro_batch_gradient_scale(1.0, micro_batches, strategy->ranks())));
  }
  check.expect_ok(strategy->reduce_gradients(), prefix + "the CPU DDP's reduction");
  const int64_t numel = cpu.flat_parameters().numel();
  const std::vector<bf16> cpu_grads(cpu.flat_gradients().data(), cpu.flat_gradients().data() + numel);
  const double cpu_norm = std::sqrt(Optimizer<bf16>::sum_of_squares(cpu_grads.data(), numel, 1.0));
  const int64_t cpu_calls = mpi.counters().calls_of(comm::Collective::all_reduce) - mpi_before.calls_of(comm::Collective::all_reduce);
  const int64_t cpu_bytes = mpi.counters().bytes_of(comm::Collective::all_reduce) - mpi_before.bytes_of(comm::Collective::all_reduce);

  // The GPU step with DDP over NCCL.
  const comm::CommCounters nccl_before = nccl.counters();
  MemoryLedger gpu_ledger;
  auto made = GptTraining::create(model, gpu_ledger, B, T, seed, options, GpuDataParallel{&nccl, plugin});
  check.expect(made.ok(), prefix + "the GPU step: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  check.expect(std::memcmp(initial.data(), cpu.flat_parameters().data(), initial.size() * sizeof(bf16)) == 0,
               prefix + "the GPU starts from the CPU model's weights, bit for bit");
  auto stepped = gpu.step(tokens.data(), targets.data(), micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU DDP step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const std::vector<bf16> gpu_grads = gpu.gradients(), updated = gpu.parameters();

  check.expect(same_on_every_rank(mpi, gpu_grads), prefix + "the reduced gradients are the same bits on every rank");
  check.expect(same_on_every_rank(mpi, updated), prefix + "the updated weights are the same bits on every rank");
  check.expect(same_on_every_rank(mpi, std::vector<double>{stepped->grad_norm}), prefix + "the gradient norm is the same on every rank");
  check.expect(nccl.counters().calls_of(comm::Collective::all_reduce) - nccl_before.calls_of(comm::Collective::all_reduce) == cpu_calls &&
                   nccl.counters().bytes_of(comm::Collective::all_reduce) - nccl_before.bytes_of(comm::Collective::all_reduce) == cpu_bytes,
               prefix + "NCCL's bucket all-reduces (calls, bytes) equal the CPU DDP's (" + std::to_string(cpu_calls) + ", " + std::to_string(cpu_bytes) + ")");

  const double loss_error = relative(stepped->loss, cpu_loss), norm_error = relative(stepped->grad_norm, cpu_norm);
  report(rank, prefix + "loss (rank 0's micro-batches)", loss_error, std::ldexp(1.0, -6));
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
    const std::string what = prefix + "reduced gradient " + cpu.parameter_names()[p];
    report(rank, what, error, std::ldexp(1.0, -4));
    check.expect(error <= std::ldexp(1.0, -4), what + " within 2^-4 of the CPU DDP's: " + std::to_string(error));
  }

  // The update: the CPU optimizer on the GPU's reduced gradients, from the same weights.
  auto optimizer = Optimizer<bf16>::whole(cpu_ledger, cpu.flat_parameters().data(), cpu.flat_order(), decay_mask(cpu.parameter_shapes()), options);
  check.expect(optimizer.apply(gpu_grads.data(), stepped->grad_norm * stepped->grad_norm, 1.0).has_value(), prefix + "the CPU optimizer steps");
  double worst = 0;
  int64_t moved = 0;
  for (int64_t i = 0; i < numel; ++i) {
    const double want = static_cast<double>(widen(cpu.flat_parameters().data()[i])), got = static_cast<double>(widen(updated[static_cast<size_t>(i)]));
    worst = std::max(worst, relative(got, want));
    moved += updated[static_cast<size_t>(i)].bits != initial[static_cast<size_t>(i)].bits;
  }
  report(rank, prefix + "updated weights", worst, std::ldexp(1.0, -7));
  check.expect(worst <= std::ldexp(1.0, -7), prefix + "updated weights within one bf16 unit of the CPU optimizer's: " + std::to_string(worst));
  check.expect(moved > numel / 2, prefix + "the step moves most weights");
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::check_small_models_on_gpu_ranks("ddp_gpu_test", tessera::engine::cuda::check_one_step); }
