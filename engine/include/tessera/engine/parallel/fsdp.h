// torch_fsdp on the engine (Zhao et al. 2023, "PyTorch FSDP"): every unit
// (planner::fsdp_layout: the root, and each block) is a flat parameter padded
// and sharded over the ranks; a rank keeps only its shards of the parameters,
// gradients and optimizer states. Around each unit's forward and backward
// (the model's UnitHooks, in parallel/fsdp_schedule.h's order, which the GPU
// step follows too) the unit is all-gathered into a buffer of its own
// (chunk_buffers) and released after, and its unsharded gradient (comm_buffers)
// is reduce-scattered into the rank's gradient shard as soon as the unit's
// backward ends, micro-batch by micro-batch.
//  - full_shard: a block is released after its forward and its backward; the
//    next block is gathered before the current one runs (FSDP's forward
//    prefetch and BACKWARD_PRE), so two blocks are gathered at a time, plus the
//    root, which stays gathered from the start of forward to the end of backward.
//  - shard_grad_op: every unit stays gathered from its forward to its backward.
// Mixed precision as FSDP's MixedPrecision(param_dtype=bf16 or fp16): the
// shards stay fp32 (they are the optimizer's weights, so there is no master
// copy) and are cast to 16-bit into the gathered buffer; 16-bit gradients are
// reduce-scattered and added into the fp32 gradient shard.
// On one fp32 rank nothing is gathered: the shard is the whole model and the
// parameters are views of it.
// With cpu_offload (FSDP's CPUOffload, planner/fsdp_offload.h) the weight,
// gradient and optimizer shards are booked on the host, where the optimizer
// steps; a gather first copies the unit's fp32 shard to a device buffer of
// its own (`parameters`) and casts it from there, and a reduction widens this
// rank's reduced slot into a device fp32 buffer (`gradients`) that is then
// added into the host shard. The arithmetic is the same as without offload.
#pragma once

#include <optional>
#include <vector>

#include "tessera/engine/parallel/fsdp_schedule.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {

template <typename T>
class FullyShardedDataParallel final : public ParallelStrategy<T>, private UnitHooks {
 public:
  FullyShardedDataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model);

  FlatStorage storage() const override { return FlatStorage{0, MemoryCategory::gradients, false}; }
  Status attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) override;
  void zero_gradients() override { gradient_shard_.zero(); }
  Status reduce_gradients() override { return error_; }  // done unit by unit in backward
  Result<std::optional<double>> step(double loss_scale) override;
  OptimizerShard& optimizer() override { return *optimizer_; }
  bool sharded() const override { return this->group_.size() > 1; }
  void initialize(const planner::Model& model, uint64_t seed) override;

 private:
  void before_forward(int layer) override;
  void after_forward(int layer) override;
  void before_backward(int layer) override;
  void after_backward(int layer) override;

  const planner::ShardedUnit& unit_of(int unit) const { return layout_.units[static_cast<size_t>(unit + 1)]; }
  void apply(const std::vector<FsdpMove>& moves);
  // Points the unit's parameters (and gradients) at `params` (and `grads`), laid out as the unit's flat buffer.
  void bind(int unit, T* params, T* grads);
  void gather(int unit);
  void release(int unit);
  void reduce_unit_gradients(int unit);
  bool failed() const { return !error_.ok(); }

  const planner::Model& model_description_;
  const bool offload_;  // plugin.cpu_offload: the shards on the host
  std::vector<planner::FlatParameter> order_;
  planner::FsdpLayout layout_;
  FsdpSchedule schedule_;  // which unit is gathered, reduced and released at each hook (fsdp_schedule.h)
  MemoryLedger* ledger_ = nullptr;
  Transformer<T>* model_ = nullptr;
  Tensor<float> parameter_shard_, gradient_shard_;
  std::optional<Optimizer<float>> optimizer_;
  std::vector<Tensor<T>> gathered_;        // per unit (index unit + 1), while gathered
  std::vector<Tensor<T>> unit_gradients_;  // per unit, during its backward
  Status error_ = Status::success();       // the first communication failure inside a hook
};

}  // namespace tessera::engine
