// What the GPU data-parallel tests (ZeRO, Gemini, FSDP, hybrid_parallel's ZeRO)
// compare the GPU step with: one step of the CPU engine under the same plugin
// over MPI, as the CPU trainer runs it (trainer.cpp, gradient_accumulation.h),
// on each rank's own micro-batches, keeping its loss, norm, reduced flat
// gradients and traffic; under tensor parallelism (`tensor`: MPI's group of
// the rank's tensor-parallel ranks) of the rank's part, its traffic on that group too;
// under context parallelism (`context`: MPI's group of the context ranks;
// B sequences of T local tokens each, the rank's chunks) through the ring;
// and the checks the sharded tests (Gemini, FSDP) make against it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/planner/tensor_parallel.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/registry.h"

namespace tessera::engine::cuda::testing {

// Each rank's own micro-batches of the global batch, micro_batches · B · T tokens.
struct Batch {
  std::vector<int32_t> tokens, targets;
  int64_t micro_batches = 1;
};

struct CpuStep {
  bool ok = false;
  double loss = 0, norm = 0;
  std::vector<bf16> reduced;  // the flat gradients after the reduction, whole (under ZeRO, this rank's shard is reduced)
  comm::CommCounters moved, tensor_moved;
};

struct CpuTensorParallel {
  comm::Communicator* group = nullptr;  // null: none
  bool sequence_parallel = false;
};

// This rank's micro-batches of the global batch: random tokens of the small
// models' 97-token vocabulary, seeded by the rank.
inline Batch rank_batch(int rank, int64_t micro_batches, int64_t micro_batch_tokens) {
  const auto seed = static_cast<uint32_t>(rank);
  const auto n = static_cast<size_t>(micro_batches * micro_batch_tokens);
  return Batch{random_tokens(n, 97, 1 + 2 * seed), random_tokens(n, 97, 2 + 2 * seed), micro_batches};
}

inline CpuStep cpu_reference_step(const planner::Model& model, const planner::PluginOptions& plugin, const Batch& batch, int64_t B, int64_t T,
                                  uint64_t seed, comm::Communicator& mpi, Checker& check, const std::string& prefix, CpuTensorParallel tensor = {},
                                  comm::Communicator* context = nullptr) {
  CpuStep out;
  const int64_t tp = tensor.group != nullptr ? tensor.group->size() : 1;
  const planner::Model part = planner::tp_rank_model(model, tp);  // what the data-parallel ranks share (trainer.cpp's local_model_)
  auto strategy = make_parallel_strategy<bf16>(mpi, plugin, part);
  if (tensor.group != nullptr) strategy->set_model_parallel(tensor.group, nullptr, planner::counted_in_gradient_norm(part, tensor.group->rank()));
  MemoryLedger ledger;
  auto created = Transformer<bf16>::create(model, ledger, B, T, seed, planner::RecomputeMode::none, strategy->storage(), tensor.group, tensor.sequence_parallel,
                                           {}, context);
  check.expect(created.ok(), prefix + "the CPU model");
  if (!created.ok()) return out;
  Transformer<bf16> cpu = std::move(created).value();
  check.expect_ok(strategy->attach(ledger, cpu, decay_mask(cpu.parameter_shapes()), OptimizerOptions{}), prefix + "the CPU strategy");
  strategy->initialize(part, seed);
  const comm::CommCounters before = mpi.counters(), tensor_before = tensor.group != nullptr ? tensor.group->counters() : comm::CommCounters{};
  strategy->zero_gradients();
  for (int64_t micro = 0; micro < batch.micro_batches; ++micro) {
    const int64_t first = micro * B * T;
    out.loss = add_micro_batch_loss(out.loss, cpu.forward(batch.tokens.data() + first, batch.targets.data() + first), batch.micro_batches);
    strategy->prepare_backward(reduces_in_backward(micro, batch.micro_batches));
    cpu.backward(static_cast<float>(micro_batch_gradient_scale(1.0, batch.micro_batches, strategy->ranks())));
  }
  cpu.reduce_sequence_parallel_gradients();  // as the trainer does after the step's last backward (nothing without sequence parallelism)
  check.expect_ok(strategy->reduce_gradients(), prefix + "the CPU reduction");
  out.reduced.assign(cpu.flat_gradients().data(), cpu.flat_gradients().data() + cpu.flat_gradients().numel());
  auto stepped = strategy->step(1.0);
  check.expect(stepped.ok() && stepped->has_value(), prefix + "the CPU step");
  if (!stepped.ok() || !stepped->has_value()) return out;
  out.norm = stepped->value();
  out.moved = mpi.counters().since(before);
  if (tensor.group != nullptr) out.tensor_moved = tensor.group->counters().since(tensor_before);
  out.ok = true;
  return out;
}

// The CPU engine's DDP step on the same batch: the reduced flat gradients the sharded steps' pieces are held to.
inline CpuStep cpu_ddp_step(const planner::Model& model, const Batch& batch, int64_t B, int64_t T, uint64_t seed, comm::Communicator& mpi, Checker& check,
                            const std::string& prefix) {
  planner::PluginOptions ddp;
  ddp.kind = planner::PluginKind::torch_ddp;
  return cpu_reference_step(model, ddp, batch, B, T, seed, mpi, check, prefix);
}

// The CPU optimizer (optimizer.h) of this rank's shard, laid out as
// `layout`, from `weights` (bf16 parameters with fp32 master weights, or the
// fp32 weights FSDP keeps), applied to the GPU's reduced `gradients` at the
// GPU's global `norm`: the weights it leaves.
template <typename W>
std::vector<W> cpu_optimizer_update(const planner::Model& model, const planner::OptimizerLayout& layout, std::vector<W> weights,
                                    const std::vector<bf16>& gradients, double norm, Checker& check, const std::string& prefix) {
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& p : planner::flat_parameter_order(model.inventory)) {
    shapes.push_back(model.inventory.tensors[static_cast<size_t>(p.tensor_index)].shape);
  }
  MemoryLedger ledger;
  Optimizer<W> optimizer(ledger, weights.data(), layout.shard_numel, layout.pieces, decay_mask(shapes), OptimizerOptions{});
  check.expect(optimizer.apply(gradients.data(), norm * norm, 1.0).has_value(), prefix + "the CPU optimizer steps");
  return weights;
}

// The GPU step's `stepped` (its NCCL traffic `moved`) against the CPU
// engine's step `cpu` of the same plugin (`engine` names it in the lines): on
// 2 or more ranks NCCL's reduce-scatters, all-gathers and all-reduces (calls
// and bytes) equal the CPU's on MPI; this rank's loss and the global norm
// within 2^-6 relative (ddp_gpu_test.cpp's bounds, for its reasons).
inline void check_against_cpu_step(const std::string& prefix, const std::string& engine, const GpuStepResult& stepped, const comm::CommCounters& moved,
                                   const CpuStep& cpu, int rank, int ranks, Checker& check) {
  if (ranks > 1) {
    for (const comm::Collective c : {comm::Collective::reduce_scatter, comm::Collective::all_gather, comm::Collective::all_reduce}) {
      check.expect(moved.calls_of(c) == cpu.moved.calls_of(c) && moved.bytes_of(c) == cpu.moved.bytes_of(c),
                   prefix + "NCCL's " + std::string(enum_name(c)) + " calls and bytes (" + std::to_string(moved.calls_of(c)) + ", " +
                       std::to_string(moved.bytes_of(c)) + ") equal the CPU " + engine + "'s (" + std::to_string(cpu.moved.calls_of(c)) + ", " +
                       std::to_string(cpu.moved.bytes_of(c)) + ")");
    }
  }
  const double loss_error = relative(stepped.loss, cpu.loss), norm_error = relative(stepped.grad_norm, cpu.norm);
  report(rank, prefix + "loss (rank 0's micro-batches)", loss_error, std::ldexp(1.0, -6));
  report(rank, prefix + "global gradient norm", norm_error, std::ldexp(1.0, -6));
  check.expect(loss_error <= std::ldexp(1.0, -6), prefix + "loss within 2^-6 of the CPU " + engine + "'s: " + std::to_string(loss_error));
  check.expect(norm_error <= std::ldexp(1.0, -6), prefix + "gradient norm within 2^-6 of the CPU " + engine + "'s: " + std::to_string(norm_error));
}

// A rank's reduced gradients `shard` (laid out as `layout`) against the CPU
// DDP's reduced flat gradients `reduced`, piece by piece: each piece within
// 2^-4 in norm (ddp_gpu_test.cpp's bound). `what` names the shard in the lines.
inline void check_reduced_pieces(const std::string& prefix, const std::string& what, const planner::Model& model, const planner::OptimizerLayout& layout,
                                 const std::vector<bf16>& reduced, const std::vector<bf16>& shard, int rank, Checker& check) {
  check.expect(static_cast<int64_t>(shard.size()) == layout.shard_numel, prefix + "the GPU's gradients are this rank's " + what);
  if (static_cast<int64_t>(shard.size()) != layout.shard_numel) return;
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  double worst_piece = 0;
  for (const planner::ShardPiece& piece : layout.pieces) {
    double difference = 0, reference = 0;
    const int64_t flat = order[static_cast<size_t>(piece.parameter)].offset + piece.offset_in_parameter;
    for (int64_t i = 0; i < piece.numel; ++i) {
      const double want = static_cast<double>(widen(reduced[static_cast<size_t>(flat + i)]));
      const double d = static_cast<double>(widen(shard[static_cast<size_t>(piece.offset_in_shard + i)])) - want;
      difference += d * d;
      reference += want * want;
    }
    worst_piece = std::max(worst_piece, std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30));
  }
  report(rank, prefix + "reduced gradient " + what + " (worst piece)", worst_piece, std::ldexp(1.0, -4));
  check.expect(worst_piece <= std::ldexp(1.0, -4), prefix + "every piece of the reduced " + what + " within 2^-4 of the CPU DDP's: " + std::to_string(worst_piece));
}

// The update: each of this rank's `updated` weights (bf16, laid out as
// `layout`) within one bf16 unit (2^-7 relative) of the CPU optimizer's
// `want` on the same shard. `what` names the shard in the lines.
template <typename W>
void check_updated_pieces(const std::string& prefix, const std::string& what, const planner::OptimizerLayout& layout, const std::vector<bf16>& updated,
                          const std::vector<W>& want, int rank, Checker& check) {
  double worst = 0;
  for (const planner::ShardPiece& piece : layout.pieces) {
    for (int64_t i = piece.offset_in_shard; i < piece.offset_in_shard + piece.numel; ++i) {
      const double expected = static_cast<double>(widen(narrow<bf16>(widen(want[static_cast<size_t>(i)]))));
      worst = std::max(worst, relative(static_cast<double>(widen(updated[static_cast<size_t>(i)])), expected));
    }
  }
  report(rank, prefix + "updated " + what, worst, std::ldexp(1.0, -7));
  check.expect(worst <= std::ldexp(1.0, -7), prefix + "the updated " + what + " within one bf16 unit of the CPU optimizer's: " + std::to_string(worst));
}

// The planner's estimate of the same run (`ranks` data-parallel ranks of B
// sequences of T tokens, `micro_batches` accumulated), rank 0's row (every
// rank's is the same here); nullopt, a failed check, when it has none.
inline std::optional<planner::RankMemory> planned_rank_memory(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, int64_t B,
                                                              int64_t T, int64_t micro_batches, Checker& check, const std::string& prefix) {
  auto gpu = planner::load_gpu("h100-80g");
  check.expect(gpu.ok(), prefix + "the h100-80g profile");
  if (!gpu.ok()) return std::nullopt;
  planner::EstimateRequest request;
  request.layout.dp = ranks;
  request.plugin = plugin;
  request.training.micro_batch_size = B;
  request.training.seq_len = T;
  request.training.num_micro_batches = micro_batches;
  request.training.activation_profile = planner::ActivationProfile::tessera_gpu;  // the GPU step's: its host blocks pinned
  auto estimate = planner::estimate_memory(model, gpu.value(), request);
  check.expect(estimate.ok(), prefix + "the planner's estimate");
  if (!estimate.ok()) return std::nullopt;
  return estimate->ranks.at(0);
}

}  // namespace tessera::engine::cuda::testing
