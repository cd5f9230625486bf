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

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// Whether the engine executes `plugin` in `precision` for a model of `params`
// parameters on `dp` ranks; an error names the option to change.
Status check_data_parallel_supported(const planner::PluginOptions& plugin, planner::Precision precision, int64_t params, int64_t dp);

template <typename T>
class DataParallel {
 public:
  DataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, int64_t params);

  // How the model's flat parameters and gradients are to be allocated.
  FlatStorage storage() const;
  // Allocates the optimizer's shard and the bucket, for the model built with storage().
  void attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options);

  // What backward multiplies the loss gradient by, besides the loss scale and 1/k.
  double gradient_scale() const { return 1.0 / static_cast<double>(group_.size()); }
  // After the step's last backward: every rank's shard of the gradients holds the sum over ranks.
  Status reduce_gradients();
  // The optimizer step on this rank's shard, then the weights made equal on
  // every rank; the global norm before clipping, nullopt when not finite (no update).
  Result<std::optional<double>> step(double loss_scale);

  Optimizer<T>& optimizer() { return *optimizer_; }
  bool sharded() const { return zero_stage_ > 0; }

 private:
  T* shard_gradients();
  Status reduce_stage1();

  comm::Communicator& group_;
  planner::PluginOptions plugin_;
  int zero_stage_ = 0;  // 0: DDP
  int64_t params_ = 0, shard_ = 0;
  Transformer<T>* model_ = nullptr;
  std::optional<Optimizer<T>> optimizer_;
  Tensor<T> bucket_;           // stage 1: the reduce bucket
  Tensor<T> gradient_shard_;   // stage 2: the reduced gradients of this rank's shard
};

}  // namespace tessera::engine
