// Data parallelism over one group of ranks, as the plan's plugin names it:
// where the model's flat buffers, the gradient bucket and the optimizer's shard
// live, how gradients are reduced after the step's last backward, and how the
// weights are brought back in step after the update.
//
//  - torch_ddp: every state replicated; the flat gradient buffer is
//    all-reduced in buckets of the plan's bucket_cap_mb, the last parameters
//    first (ddp_buckets.h, the plan the GPU step shares). In the
//    step's last backward each bucket's all-reduce is started as soon as the
//    layers holding its gradients have finished their backward (the model's
//    UnitHooks), and runs while backward goes on through the earlier layers
//    (Li et al. 2020, "PyTorch Distributed", §3.2.3 and §3.3.3); the step
//    waits for them after backward.
//  - low_level_zero stage 1 (Rajbhandari et al. 2020 §5.1; ColossalAI
//    LowLevelZeroOptimizer): full gradients; each rank's shard of them is
//    reduce-scattered through buckets of reduce_bucket_size elements, piece
//    by piece (zero_buckets.h); with more than one piece, two buckets, and in
//    the step's last backward each piece's reduce-scatter starts as soon as
//    backward has completed its gradients (zero_overlap.h, OverlappedZero1,
//    shared with the GPU step); the optimizer (fp32 master weights and
//    states) holds the rank's shard only, and the updated shards are
//    all-gathered into every rank's parameters. hybrid_parallel's stage 1
//    reduces its one bucket's pieces after backward.
//  - low_level_zero stage 2 (§5.2): the reduced shard is the only gradient
//    kept (gradients). With a reduce bucket as large as the padded model, the
//    full gradient buffer is the bucket (comm_buffers), reduce-scattered once
//    a step. With a smaller one (planner::zero2_bucket_numel) the model has no
//    gradient buffer: before each layer's backward its gradients are bound
//    into one of two buckets, filled from its end down so that it holds one
//    range of the flat order; when the next layer would not fit, the bucket's
//    reduce-scatter to the ranks owning each part is started
//    (Communicator::start_reduce_scatter_v) and backward goes on into the
//    other bucket, once that one's reduction has finished and its parts were
//    added into their shards (zero_overlap.h, OverlappedZero2, shared with
//    the GPU step; DeepSpeed's overlap_comm and ColossalAI's
//    overlap_communication work the same way). Every backward ends with both
//    reduced.
//  - --cpu-offload (ZeRO-Offload, Ren et al. 2021) at either stage, of
//    low_level_zero and of hybrid_parallel alike (ColossalAI hands both
//    plugins' cpu_offload to LowLevelZeroOptimizer): the optimizer's fp32
//    master weights and states and an fp32 copy of the reduced gradient
//    shard live on the host, where the optimizer steps. Under tensor or
//    pipeline parallelism the shard is of the rank's part, and the norm
//    counts its pieces as without offload, so nothing but where the
//    optimizer's memory lives changes.
//
// Gradients are reduced once per optimizer step, in or after the last micro-batch
// (except bucketed ZeRO-2, every backward): backward accumulates k
// micro-batches into the full buffer first (PyTorch's no_sync), so k
// micro-steps then one step equal one batch k times larger.
// Backward scales by 1 / (k · dp), so the reduced sum is the mean gradient of
// the global batch. The gradient norm is global: under ZeRO each rank's sum of
// squares over its shard is all-reduced before clipping and the overflow check.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tessera/engine/parallel/ddp_buckets.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/engine/parallel/zero_overlap.h"
#include "tessera/engine/tensor.h"

namespace tessera::engine {

template <typename T>
class DataParallel final : public ParallelStrategy<T>, private UnitHooks {
 public:
  DataParallel(comm::Communicator& group, const planner::PluginOptions& plugin, const planner::Model& model);

  FlatStorage storage() const override;
  Status attach(MemoryLedger& ledger, Transformer<T>& model, std::vector<bool> decay, const OptimizerOptions& options) override;
  void zero_gradients() override {
    model_->zero_gradients();
    if (bucketed_) gradient_shard_.zero();  // the shard accumulates every backward's reduced gradients
  }
  void prepare_backward(bool last_micro_batch) override { overlap_this_backward_ = last_micro_batch; }
  Status reduce_gradients() override;
  Result<std::optional<double>> step(double loss_scale) override;
  OptimizerShard& optimizer() override { return *optimizer_; }
  bool sharded() const override { return zero_stage_ > 0 && this->group_.size() > 1; }
  Status weights_restored() override;

 private:
  T* shard_parameters();
  T* shard_gradients();
  // Starts every bucket whose gradients are complete once backward has reached
  // `layer` (all of them for planner::kEmbeddingLayer, the last to finish).
  void start_ready_buckets(int layer);

  void before_forward(int) override {}
  void after_forward(int) override {}
  void before_backward(int layer) override;
  void after_backward(int layer) override;

  // Bucketed ZeRO-2: the layer's gradients bound into a bucket (zero_overlap.h).
  void place_in_bucket(int layer);

  const planner::Model& model_description_;
  planner::PluginOptions plugin_;
  int zero_stage_ = 0;  // 0: DDP
  int64_t params_ = 0, shard_ = 0;
  Transformer<T>* model_ = nullptr;
  std::optional<Optimizer<T>> optimizer_;
  Tensor<T> bucket_;           // stage 1, and stage 2 when bucketed: the reduce buckets (zero_buffers)
  Tensor<T> gradient_shard_;   // stage 2: the reduced gradients of this rank's shard
  bool bucketed_ = false;      // stage 2 with buckets smaller than the padded model
  std::unique_ptr<ZeroReductionMemory> reduction_memory_;  // the buckets' host copies and additions
  std::optional<OverlappedZero1> zero1_;  // stage 1
  std::optional<OverlappedZero2> zero2_;  // bucketed stage 2
  Tensor<float> host_gradients_;  // cpu_offload: the shard's gradients in fp32 on the host, where the optimizer steps
  // DDP's overlap: the buckets, how many have been started this step.
  std::optional<DdpBucketPlan> buckets_;
  size_t started_buckets_ = 0;
  bool overlap_this_backward_ = false;
  Status error_ = Status::success();  // the first communication failure inside a hook
};

}  // namespace tessera::engine
