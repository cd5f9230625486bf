// Data parallelism over one group of ranks, as the plan's plugin names it:
// where the model's flat buffers, the gradient bucket and the optimizer's shard
// live, how gradients are reduced after the step's last backward, and how the
// weights are brought back in step after the update.
//
//  - torch_ddp: every state replicated; the flat gradient buffer is
//    all-reduced in buckets of the plan's bucket_cap_mb, the last parameters
//    first (PyTorch DDP builds its buckets in reverse parameter order, the
//    order backward completes them). The buckets are ranges of the gradient
//    buffer (gradient_as_bucket_view), so no gradient is copied.
//  - low_level_zero stage 1 (Rajbhandari et al. 2020 §5.1; ColossalAI
//    LowLevelZeroOptimizer): full gradients; each rank's shard of them is
//    reduce-scattered through a bucket of reduce_bucket_size elements; the
//    optimizer (fp32 master weights and states) holds the rank's shard only,
//    and the updated shards are all-gathered into every rank's parameters.
//  - low_level_zero stage 2 (§5.2): as stage 1, but the full gradient buffer is
//    the reduce bucket itself (comm_buffers) and the reduced shard is the only
//    gradient kept (gradients).
//
// Gradients are reduced once per optimizer step, after the last micro-batch:
// backward accumulates k micro-batches into the full buffer first (PyTorch's
// no_sync), so k micro-steps then one step equal one batch k times larger.
// Backward scales by 1 / (k · dp), so the reduced sum is the mean gradient of
// the global batch. The gradient norm is global: under ZeRO each rank's sum of
// squares over its shard is all-reduced before clipping and the overflow check.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/tensor.h"

namespace tessera::engine {

template <typename T>
class DataParallel final : public ParallelStrategy<T> {
 public:
  DataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model);

  FlatStorage storage() const override;
  Status attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) override;
  void zero_gradients() override { model_->zero_gradients(); }
  Status reduce_gradients() override;
  Result<std::optional<double>> step(double loss_scale) override;
  OptimizerShard& optimizer() override { return *optimizer_; }
  bool sharded() const override { return zero_stage_ > 0 && this->group_.size() > 1; }
  Status weights_restored() override;

 private:
  T* shard_parameters();
  T* shard_gradients();
  Status reduce_stage1();

  const planner::Model& model_description_;
  planner::PluginOptions plugin_;
  int zero_stage_ = 0;  // 0: DDP
  int64_t params_ = 0, shard_ = 0;
  Transformer<T>* model_ = nullptr;
  std::optional<Optimizer<T>> optimizer_;
  Tensor<T> bucket_;           // stage 1: the reduce bucket
  Tensor<T> gradient_shard_;   // stage 2: the reduced gradients of this rank's shard
  Tensor<float> host_gradients_;  // cpu_offload: the shard's gradients in fp32 on the host, where the optimizer steps
};

}  // namespace tessera::engine
