// Pipeline parallelism on one GPU per rank: `mpirun -np 2 (or 4)
// tessera_pipeline_gpu_test` (tools/gpu-check runs it on 2 GPUs and, where
// there are 4, on 4; ctest on 2 ranks, skipped without 2 GPUs). The ranks are
// 2 pipeline stages × 1 data-parallel rank, or on 4 ranks 2 stages × 2
// data-parallel ranks (DDP, and ZeRO-1 over each stage's 2 ranks, its
// optimizer on the device or offloaded: src/cuda/zero_offload.h), 2
// stages × 2 tensor-parallel ranks (without and with sequence parallelism)
// and 2 stages × 2 context-parallel ranks (DDP and ZeRO-1 over them; each
// rank its chunks of sequences of 48 tokens, the ring over its stage's
// blocks, model/ring_attention.h and cuda/ring_attention.h), in the planner's rank order
// (parallel/process_groups.h); each runs one step of the GPU training
// step's stage over NCCL (cuda/gpt_training.h: send_recv between its passes,
// parallel/pipeline_transfers.h) and one step of the CPU engine's stage over
// MPI (parallel/pipeline.h, model/transformer.cpp, the CPU trainer's tied
// embedding sum, sequence-parallel norm sums and data-parallel sum) on the same micro-batches, from the
// same weights, for small_models.h's GPT-2 (a tied head: its copy on the last
// stage) and Qwen2 (untied), 1F1B and GPipe, on 1 and 3 micro-batches, and
// the interleaved schedule with 2 model chunks per stage (the models with 4
// blocks, one a chunk: the wrap-around sends both ways between the 2 stages)
// on 2 and 4 micro-batches.
//
// Checked, on every rank:
//  - the GPU stage starts from the CPU stage's tensors, bit for bit;
//  - the loss (the last stage's) and the global gradient norm within 2^-6
//    relative of the CPU's, this stage's gradients per parameter within 2^-4
//    in norm (ZeRO-1: this rank's shard's pieces of each against the same
//    places): gpt_training_gpu_test.cpp's bf16 bounds, for its reasons;
//  - the norm the same on every rank, and after the update the first stage's
//    embedding and the last stage's copy the same bits (had the tied sum been
//    missed, they would differ after one step);
//  - NCCL's sends and recvs in the pipeline group, calls and bytes, the CPU
//    stage's over MPI: the same messages, one per pass that hands something on
//    (under sequence parallelism each this rank's N/tp rows); under context
//    parallelism the context group's the CPU ring's, planner::ring_sends per
//    block of the stage and micro-batch, each a K/V block (planner::ring_block_elements).
// These bounds have not yet met a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/data.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/pipeline.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/planner/context_parallel.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine::cuda {
namespace {

using testing::Checker;
using testing::relative;
using testing::report;
using testing::same_on_every_rank;

constexpr int64_t kStages = 2, B = 2;

// The sequences' tokens: 37, or under context parallelism 48 (each rank's chunks a multiple of 4 tokens, gpt_training.cpp's alignment rule).
int64_t sequence_tokens(int64_t cp) { return cp > 1 ? 48 : 37; }

// One layout's groups, over MPI (the CPU engine's) and NCCL (the GPU step's).
struct Groups {
  planner::ParallelLayout layout;
  ProcessGroups mpi;
  std::unique_ptr<comm::Communicator> nccl_pipeline, nccl_data, nccl_tensor, nccl_context, mpi_embedding;  // nccl_data: the dp × cp ranks
};

// The relative error, in norm, of each parameter's pieces in this rank's
// ZeRO shard (`shard`: the shard's elements) against `want`'s (the whole
// flat gradients) at the same places; parameters without a piece here are left out.
std::vector<std::pair<int, double>> shard_errors(const std::vector<bf16>& shard, const std::vector<bf16>& want, const std::vector<planner::FlatParameter>& order,
                                                 const std::vector<planner::ShardPiece>& pieces) {
  std::vector<double> difference(order.size(), 0.0), reference(order.size(), 0.0);
  std::vector<bool> here(order.size(), false);
  for (const planner::ShardPiece& piece : pieces) {
    const auto p = static_cast<size_t>(piece.parameter);
    here[p] = true;
    for (int64_t i = 0; i < piece.numel; ++i) {
      const double w = static_cast<double>(widen(want[static_cast<size_t>(order[p].offset + piece.offset_in_parameter + i)]));
      const double d = static_cast<double>(widen(shard[static_cast<size_t>(piece.offset_in_shard + i)])) - w;
      difference[p] += d * d;
      reference[p] += w * w;
    }
  }
  std::vector<std::pair<int, double>> errors;
  for (size_t p = 0; p < order.size(); ++p) {
    if (here[p]) errors.emplace_back(static_cast<int>(p), std::sqrt(difference[p]) / std::max(std::sqrt(reference[p]), 1e-30));
  }
  return errors;
}

void check_step(const char* name, const planner::Model& model, planner::PipelineSchedule schedule, int64_t chunks, int64_t micro_batches, int zero_stage,
                bool cpu_offload,
                Groups& groups, comm::Communicator& world, Checker& check) {
  comm::Communicator& mpi_pipeline = *groups.mpi.pipeline;
  comm::Communicator& mpi_data = *groups.mpi.data_context;  // the dp × cp ranks that reduce gradients together
  comm::Communicator& mpi_tensor = *groups.mpi.tensor;
  comm::Communicator& mpi_context = *groups.mpi.context;
  const int stage = mpi_pipeline.rank();
  const int64_t cp = groups.layout.cp, S = sequence_tokens(cp), T = S / cp;  // T: this rank's tokens of each sequence
  const int64_t dp = mpi_data.size(), tp = mpi_tensor.size(), micro_tokens = B * T;
  const bool sp = groups.layout.sequence_parallel;
  const uint64_t seed = 5;
  const planner::PipelinePlacement placement{kStages, stage, chunks};
  const planner::Model part = planner::tp_rank_model(planner::stage_model(model, placement), tp);
  const std::string prefix = std::string(name) + " " + std::string(enum_name(schedule)) + (chunks > 1 ? " × " + std::to_string(chunks) + " chunks" : "") + " pp 2 × dp " + std::to_string(dp / cp) + " × tp " +
                             std::to_string(tp) + (sp ? " + sp" : "") + (cp > 1 ? " × cp " + std::to_string(cp) : "") + (zero_stage > 0 ? ", ZeRO-1" : "") + (cpu_offload ? " offloaded" : "") + ", " + std::to_string(micro_batches) + " micro-batches, stage " +
                             std::to_string(stage) + " tp rank " + std::to_string(mpi_tensor.rank()) + " ";
  // This data-parallel rank's micro-batches, the same on every stage and tensor-parallel rank; a context rank's chunks of them.
  const auto seed_of = static_cast<uint32_t>(groups.mpi.coordinates.dp_rank + 1);
  std::vector<int32_t> tokens = testing::random_tokens(static_cast<size_t>(micro_batches * B * S), 97, seed_of);
  std::vector<int32_t> targets = testing::random_tokens(static_cast<size_t>(micro_batches * B * S), 97, 100 + seed_of);
  if (cp > 1) {
    const planner::ContextSplit split{cp, groups.mpi.coordinates.cp_rank};
    for (std::vector<int32_t>* whole : {&tokens, &targets}) {
      std::vector<int32_t> local(static_cast<size_t>(micro_batches * micro_tokens));
      take_context_chunks(local.data(), whole->data(), micro_batches * B, S, split);
      *whole = std::move(local);
    }
  }
  std::vector<std::vector<int32_t>> step_tokens, step_targets;
  for (int64_t m = 0; m < micro_batches; ++m) {
    step_tokens.emplace_back(tokens.begin() + m * micro_tokens, tokens.begin() + (m + 1) * micro_tokens);
    step_targets.emplace_back(targets.begin() + m * micro_tokens, targets.begin() + (m + 1) * micro_tokens);
  }
  const double scale = micro_batch_gradient_scale(1.0, micro_batches, dp);

  // The CPU engine's stage over MPI, then what its trainer does after the schedule: the tied sum, the data-parallel sum.
  MemoryLedger cpu_ledger;
  auto created = Transformer<bf16>::create(model, cpu_ledger, B, T, seed, planner::RecomputeMode::none, FlatStorage{}, tp > 1 ? &mpi_tensor : nullptr, sp,
                                           placement, cp > 1 ? &mpi_context : nullptr);
  check.expect(created.ok(), prefix + "the CPU stage" + (created.ok() ? "" : ": " + created.error().message));
  if (!created.ok()) return;
  Transformer<bf16> cpu = std::move(created).value();
  PipelineStage<bf16> cpu_stage(cpu, mpi_pipeline, cpu_ledger, schedule, micro_batches);
  cpu.zero_gradients();
  const comm::CommCounters mpi_before = mpi_pipeline.counters(), ring_before = mpi_context.counters();
  Timeline timeline;
  auto cpu_loss = cpu_stage.run_step(step_tokens, step_targets, static_cast<float>(scale), timeline);
  check.expect(cpu_loss.ok(), prefix + "the CPU stage's step" + (cpu_loss.ok() ? "" : ": " + cpu_loss.error().message));
  if (!cpu_loss.ok()) return;
  const comm::CommCounters mpi_moved = mpi_pipeline.counters().since(mpi_before), mpi_ring = mpi_context.counters().since(ring_before);
  cpu.reduce_sequence_parallel_gradients();  // as the CPU trainer does after the step's last backward (nothing without sequence parallelism)
  const Slice<bf16> tied = cpu.tied_embedding_gradient();
  if (tied.numel() > 0) check.expect_ok(groups.mpi_embedding->all_reduce(tied.data(), tied.data(), static_cast<size_t>(tied.numel()), comm::ReduceOp::sum), prefix + "the CPU tied sum");
  const int64_t numel = cpu.flat_parameters().numel();
  std::vector<bf16> cpu_grads(cpu.flat_gradients().data(), cpu.flat_gradients().data() + numel);
  if (dp > 1) check.expect_ok(mpi_data.all_reduce(cpu_grads.data(), cpu_grads.data(), cpu_grads.size(), comm::ReduceOp::sum), prefix + "the CPU DDP sum");
  double cpu_sum = 0;
  for (const auto& [begin, end] : gradient_norm_runs(part, mpi_tensor.rank())) {
    cpu_sum += Optimizer<bf16>::sum_of_squares(cpu_grads.data() + begin, end - begin, 1.0);
  }
  check.expect_ok(mpi_tensor.all_reduce(&cpu_sum, &cpu_sum, 1, comm::ReduceOp::sum), prefix + "the CPU gradient norm over the tp group");
  check.expect_ok(mpi_pipeline.all_reduce(&cpu_sum, &cpu_sum, 1, comm::ReduceOp::sum), prefix + "the CPU gradient norm over the stages");
  const double cpu_norm = std::sqrt(cpu_sum);

  // The GPU step's stage over NCCL (hybrid_parallel: DDP, or ZeRO-1, over the stage's data-parallel ranks).
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = zero_stage;
  plugin.cpu_offload = cpu_offload;
  MemoryLedger gpu_ledger;
  const comm::CommCounters nccl_before = groups.nccl_pipeline->counters();
  const comm::CommCounters ring_nccl_before = cp > 1 ? groups.nccl_context->counters() : comm::CommCounters{};
  auto made = GptTraining::create(model, gpu_ledger, B, S, seed, OptimizerOptions{}, GpuDataParallel{groups.nccl_data.get(), plugin},
                                  planner::RecomputeMode::none, GpuTensorParallel{groups.nccl_tensor.get(), sp},
                                  GpuPipelineParallel{groups.nccl_pipeline.get(), schedule, chunks}, 0, GpuContextParallel{groups.nccl_context.get()});
  check.expect(made.ok(), prefix + "the GPU stage: " + (made.ok() ? "" : made.error().message));
  if (!made.ok()) return;
  GptTraining& gpu = *made.value();
  const std::vector<bf16> initial = gpu.parameters();
  check.expect(initial.size() == static_cast<size_t>(numel) && std::memcmp(initial.data(), cpu.flat_parameters().data(), initial.size() * sizeof(bf16)) == 0,
               prefix + "the GPU stage starts from the CPU stage's tensors, bit for bit");
  auto stepped = gpu.step(tokens.data(), targets.data(), micro_batches);
  check.expect(stepped.ok() && stepped->updated, prefix + "one GPU pipeline step: " + (stepped.ok() ? "" : stepped.error().message));
  if (!stepped.ok()) return;
  const comm::CommCounters nccl_moved = groups.nccl_pipeline->counters().since(nccl_before);
  for (comm::Collective kind : {comm::Collective::send, comm::Collective::recv}) {
    check.expect(nccl_moved.calls_of(kind) == mpi_moved.calls_of(kind) && nccl_moved.bytes_of(kind) == mpi_moved.bytes_of(kind),
                 prefix + "NCCL's " + std::string(enum_name(kind)) + "s (" + std::to_string(nccl_moved.calls_of(kind)) + ") are the CPU stage's (" +
                     std::to_string(mpi_moved.calls_of(kind)) + ")");
  }
  if (cp > 1) {  // the stage's rings: planner::ring_sends per block and micro-batch, each one K/V block of this tp rank's heads
    const comm::CommCounters ring_moved = groups.nccl_context->counters().since(ring_nccl_before);
    const planner::RingSends sends = planner::ring_sends(cp, planner::RecomputeMode::none);
    int64_t blocks = 0;
    for (const planner::StageLayers& c : planner::stage_chunks(static_cast<int>(model.config.num_layers), kStages, static_cast<int>(chunks))[static_cast<size_t>(stage)]) {
      blocks += c.num_layers;
    }
    const int64_t block_bytes = planner::ring_block_elements(B, T, model.config.kv_width(), tp) * static_cast<int64_t>(sizeof(bf16));
    testing::check_ring_traffic(prefix, ring_moved, mpi_ring, micro_batches * blocks * (sends.forward + sends.backward), block_bytes, check);
  }
  check.expect(same_on_every_rank(world, std::vector<double>{stepped->grad_norm}), prefix + "the gradient norm is the same on every rank");
  const double norm_error = relative(stepped->grad_norm, cpu_norm);
  report(world.rank(), prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU's: " + std::to_string(norm_error));
  if (placement.last()) {
    const double loss_error = relative(stepped->loss, cpu_loss.value());
    report(world.rank(), prefix + "loss", loss_error, std::ldexp(1.0, -6));
    check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU's: " + std::to_string(loss_error));
  }
  const std::vector<bf16> gpu_grads = gpu.gradients(), updated = gpu.parameters();
  std::vector<std::pair<int, double>> errors;
  if (zero_stage > 0) {
    errors = shard_errors(gpu_grads, cpu_grads, cpu.flat_order(), planner::optimizer_layout(part, plugin, dp, mpi_data.rank()).pieces);  // over the dp × cp ranks
  } else {
    for (size_t p = 0; p < cpu.flat_order().size(); ++p) errors.emplace_back(static_cast<int>(p), testing::parameter_error(gpu_grads, cpu_grads, cpu.flat_order()[p]));
  }
  for (const auto& [p, error] : errors) {
    const std::string what = prefix + "gradient " + cpu.parameter_names()[static_cast<size_t>(p)];
    report(world.rank(), what, error, std::ldexp(1.0, -4));
    check.expect(error <= std::ldexp(1.0, -4), what + " within 2^-4 of the CPU's: " + std::to_string(error));
  }
  // The tied embedding: the first stage's and the last stage's copy, the same bits after the update.
  if (groups.mpi_embedding != nullptr && tied.numel() > 0) {
    const int64_t offset = tied.data() - cpu.flat_gradients().data();
    const std::vector<bf16> mine(updated.begin() + offset, updated.begin() + offset + tied.numel());
    check.expect(same_on_every_rank(*groups.mpi_embedding, mine), prefix + "the embedding and its copy on the last stage stay the same bits");
  }
}

// The layout's groups: MPI's from the planner's rank order, NCCL's over each of more than one rank on this rank's device.
Result<Groups> make_groups(comm::Communicator& world, const planner::ParallelLayout& layout, bool tied) {
  auto host = make_process_groups(world, layout);
  if (!host) return host.error();
  Groups groups{layout, std::move(host).value(), nullptr, nullptr, nullptr, nullptr, nullptr};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return make_error(ErrorCode::unsupported, "no current CUDA device");
  for (auto [ranks, made] : {std::pair{groups.mpi.pipeline.get(), &groups.nccl_pipeline}, std::pair{groups.mpi.data_context.get(), &groups.nccl_data},
                             std::pair{groups.mpi.tensor.get(), &groups.nccl_tensor}, std::pair{groups.mpi.context.get(), &groups.nccl_context}}) {
    if (ranks->size() == 1) continue;
    auto nccl = comm::make_nccl_communicator(*ranks, comm::NcclOptions{device, nullptr, comm::kDefaultCommTimeout});
    if (!nccl) return nccl.error();
    *made = std::move(nccl).value();
  }
  if (tied) {  // both stages are the ends with 2 stages
    auto ends = groups.mpi.pipeline->split(0, groups.mpi.pipeline->rank(), "embedding");
    if (!ends) return ends.error();
    groups.mpi_embedding = std::move(ends).value();
  }
  return groups;
}

void check_pipeline(comm::Communicator& world, comm::Communicator&, Checker& check) {
  if (world.size() != 2 && world.size() != 4) {
    check.expect(false, "the ranks (" + std::to_string(world.size()) + ") are 2 stages × 1, or on 4 ranks × 2; launch 2 or 4");
    return;
  }
  // Each layout with its ZeRO stage (0: DDP over the stage's data-parallel ranks) and whether ZeRO offloads its optimizer.
  std::vector<std::tuple<planner::ParallelLayout, int, bool>> layouts{{{world.size() / kStages, 1, kStages, false}, 0, false}};
  if (world.size() == 4) {
    layouts.insert(layouts.end(), {{{1, 2, kStages, false}, 0, false}, {{1, 2, kStages, true}, 0, false}, {{2, 1, kStages, false}, 1, false},
                                   {{2, 1, kStages, false}, 1, true}, {{1, 1, kStages, false, 2}, 0, false}, {{1, 1, kStages, false, 2}, 1, false}});
  }
  for (const auto& [layout, zero_stage, cpu_offload] : layouts) {
    for (const auto& [name, json] : {std::pair{"gpt2", testing::kSmallGpt2}, std::pair{"qwen2", testing::kSmallQwen2}}) {
      const planner::Model model = testing::small_model(json);
      const bool tied = std::any_of(model.inventory.tensors.begin(), model.inventory.tensors.end(), [](const planner::TensorInfo& t) { return t.tied_to >= 0; });
      auto groups = make_groups(world, layout, tied);
      check.expect(groups.ok(), std::string(name) + ": the pipeline's groups" + (groups.ok() ? "" : ": " + groups.error().message));
      if (!groups.ok()) return;
      for (planner::PipelineSchedule schedule : {planner::PipelineSchedule::one_f_one_b, planner::PipelineSchedule::gpipe}) {
        for (const int64_t micro_batches : {1, 3}) check_step(name, model, schedule, 1, micro_batches, zero_stage, cpu_offload, groups.value(), world, check);
      }
      const planner::Model four_blocks = testing::small_model(json, 4);
      for (const int64_t micro_batches : {2, 4}) {
        check_step(name, four_blocks, planner::PipelineSchedule::interleaved, 2, micro_batches, zero_stage, cpu_offload, groups.value(), world, check);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine::cuda

int main() { return tessera::engine::cuda::testing::run_on_gpu_ranks("pipeline_gpu_test", tessera::engine::cuda::check_pipeline); }
