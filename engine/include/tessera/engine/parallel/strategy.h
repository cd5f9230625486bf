// How the ranks of a data-parallel group share a model, as the plan's plugin
// names it: one interface for the training loop, one class per family of
// plugins (data_parallel.h: torch_ddp and low_level_zero; fsdp.h: torch_fsdp;
// gemini.h: gemini). Which pieces of the parameters each rank's optimizer
// holds is planner/optimizer_layout.h's rule, shared with checkpoints.
//
// The loop's calls, per optimizer step: zero_gradients(), the model's forward
// and, after prepare_backward(), backward for each micro-batch (a strategy may
// gather and release parameters, or start reductions, around each layer
// through the model's UnitHooks),
// reduce_gradients() after the last micro-batch, then step(). Errors raised
// inside a hook are kept and returned by the next call that returns a Status.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

template <typename T>
class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;

  // How the model's flat parameters and gradients are to be allocated.
  virtual FlatStorage storage() const = 0;
  // Allocates the optimizer's shard and the strategy's buffers, for the model built with storage().
  virtual Status attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) = 0;
  // Sets the initial weights where the strategy, not the model, holds them.
  virtual void initialize(const planner::Model& /*model*/, uint64_t /*seed*/) {}
  // Before the step's first micro-batch.
  virtual void zero_gradients() = 0;
  // Before each backward: whether it is the step's last, the one whose
  // gradients are reduced (earlier ones accumulate locally, PyTorch's no_sync).
  virtual void prepare_backward(bool /*last_micro_batch*/) {}
  // The ranks whose gradients are reduced: the n of micro_batch_gradient_scale (gradient_accumulation.h).
  int ranks() const { return group_.size(); }
  // After the step's last backward: this rank's shard of the gradients holds the sum over ranks.
  virtual Status reduce_gradients() = 0;
  // The optimizer step on this rank's shard, with the global gradient norm;
  // nullopt when the norm is not finite (no update).
  virtual Result<std::optional<double>> step(double loss_scale) = 0;
  // The optimizer of this rank's shard, as checkpoints and checks see it.
  virtual OptimizerShard& optimizer() = 0;
  // After a checkpoint restored the optimizer's weights (OptimizerShard::
  // weights_restored() has run): brings the parameters the model computes
  // with in line on every rank. Collective.
  virtual Status weights_restored() { return Status::success(); }
  // Chunks moved between the host and the device so far (Gemini).
  virtual int64_t chunk_moves() const { return 0; }
  // Whether ranks hold different optimizer states (a checkpoint needs every rank's).
  virtual bool sharded() const = 0;
  // Under tensor and pipeline parallelism: their groups (null: none), and
  // which of the rank's parameters its gradient norm counts. The norm sums
  // each rank's counted parameters over both groups: a parameter whole on
  // every rank of the tensor-parallel group (planner::TpSplit::replicated) is
  // counted on its rank 0 only, and the last stage's copy of a tied embedding
  // not at all (Megatron-LM's clip_grad_norm_fp32 skips tensor-parallel
  // duplicates and shared embeddings, param_is_not_shared).
  void set_model_parallel(comm::Communicator* tensor_group, comm::Communicator* pipeline_group, std::vector<bool> counted) {
    tensor_group_ = tensor_group != nullptr && tensor_group->size() > 1 ? tensor_group : nullptr;
    pipeline_group_ = pipeline_group != nullptr && pipeline_group->size() > 1 ? pipeline_group : nullptr;
    counted_ = std::move(counted);
  }

 protected:
  explicit ParallelStrategy(comm::Communicator& group) : group_(group) {}
  // The global gradient norm's square from each rank's shard (all-reduced when the shards differ).
  template <typename O, typename G>
  Result<double> global_sum_of_squares(const Optimizer<O>& optimizer, const G* shard_gradients, double loss_scale, bool shards_differ) {
    double sum = optimizer.counted_sum_of_squares(shard_gradients, counted_, 1.0 / loss_scale);
    if (shards_differ) {
      if (Status s = group_.all_reduce(&sum, &sum, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
    }
    for (comm::Communicator* model_parallel : {tensor_group_, pipeline_group_}) {
      if (model_parallel == nullptr) continue;
      if (Status s = model_parallel->all_reduce(&sum, &sum, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
    }
    return sum;
  }

  comm::Communicator& group_;
  comm::Communicator* tensor_group_ = nullptr;
  comm::Communicator* pipeline_group_ = nullptr;
  std::vector<bool> counted_;  // empty: every parameter
};

// Whether the engine executes `plugin` in `precision` for `model` on `dp`
// ranks; an error names the option to change.
Status check_data_parallel_supported(const planner::PluginOptions& plugin, planner::Precision precision, const planner::Model& model, int64_t dp);

// gemini_host_chunks: Gemini's leading chunks with their 16-bit shards on the
// host, where the plan solved it (`auto`); unset: as the placement says.
template <typename T>
std::unique_ptr<ParallelStrategy<T>> make_parallel_strategy(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model,
                                                            std::optional<int64_t> gemini_host_chunks = std::nullopt);

}  // namespace tessera::engine
