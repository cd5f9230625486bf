// What the GPU data-parallel tests (ZeRO, Gemini, hybrid_parallel's ZeRO)
// compare the GPU step with: one step of the CPU engine under the same plugin
// over MPI, as the CPU trainer runs it (trainer.cpp, gradient_accumulation.h),
// on each rank's own micro-batches, keeping its loss, norm, reduced flat
// gradients and traffic; under tensor parallelism (`tensor`: MPI's group of
// the rank's tensor-parallel ranks) of the rank's part, its traffic on that group too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/planner/tensor_parallel.h"

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

inline CpuStep cpu_reference_step(const planner::Model& model, const planner::PluginOptions& plugin, const Batch& batch, int64_t B, int64_t T,
                                  uint64_t seed, comm::Communicator& mpi, Checker& check, const std::string& prefix, CpuTensorParallel tensor = {}) {
  CpuStep out;
  const int64_t tp = tensor.group != nullptr ? tensor.group->size() : 1;
  const planner::Model part = planner::tp_rank_model(model, tp);  // what the data-parallel ranks share (trainer.cpp's local_model_)
  auto strategy = make_parallel_strategy<bf16>(mpi, plugin, part);
  if (tensor.group != nullptr) strategy->set_model_parallel(tensor.group, nullptr, planner::counted_in_gradient_norm(part, tensor.group->rank()));
  MemoryLedger ledger;
  auto created = Transformer<bf16>::create(model, ledger, B, T, seed, planner::RecomputeMode::none, strategy->storage(), tensor.group, tensor.sequence_parallel);
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

}  // namespace tessera::engine::cuda::testing
