// ZeRO-1/2 for the GPU training step (cuda/gpt_training.h): low_level_zero
// as the CPU engine runs it (parallel/data_parallel.h), on device buffers over
// the data-parallel ranks' NCCL communicator (comm/nccl.h). Each rank keeps
// the bf16 parameters whole (padded to dp shards, planner/sharding.h) and
// only its shard of the fp32 master weights and AdamW's two states (the
// pieces of planner/optimizer_layout.h, the rule checkpoints share):
//  - stage 1: the full bf16 gradients (`gradients`); each rank's shard of them
//    is reduce-scattered piece by piece (zero_buckets.h, zero1_pieces)
//    through the reduce buckets (`comm_buffers`), copied in and out with
//    device copies. With more than one piece there are two buckets and, in
//    the step's last backward, each piece's reduce-scatter is started as soon
//    as backward has completed its gradients, while backward goes on;
//  - stage 2: the reduced gradient shard is the only gradient kept
//    (`gradients`). With a reduce bucket as large as the padded model, the
//    full gradient buffer is the bucket (`comm_buffers`), reduce-scattered
//    into the shard once a step; with a smaller one there is no full buffer
//    but two buckets: before each layer's backward its gradients are placed
//    in the bucket being filled; when they would not fit, that bucket's
//    reduce-scatter to the ranks owning its parts is started and backward
//    goes on into the other bucket, once that one's reduction has finished
//    and its parts were added into the shard (DeepSpeed's overlap_comm).
// Which bucket, when a reduction starts and when a bucket is free again is
// zero_overlap.h's host logic, which the CPU engine runs too and which is
// tested on the CPU (tests/engine/zero_overlap_test.cpp); this file only
// supplies the device copies and additions (DeviceZeroMemory). The started
// reduce-scatters run on the communicator's stream after an event on the
// compute stream (comm/nccl.h), so the compute stream goes on with the next
// layers' backward; a bucket is reused, and its reduced parts read, after the
// host has waited for its reduction (Communicator::finish_oldest), which the
// compute stream's queued work covers unless the reduction takes longer than
// the backward of the layers the other bucket holds.
// hybrid_parallel's ZeRO (stage 1 or 2 over the data-parallel ranks of each
// tensor-parallel part: `model` is the rank's part, planner::tp_rank_model)
// keeps the same shards, categories and rules with one bucket
// (planner::hybrid_zero_buckets): stage 1's pieces and stage 2's whole buffer
// are reduce-scattered after the step's last backward only. Under tensor
// parallelism that is a rule, not a choice: backward's all-reduces run on the
// tensor-parallel communicator, and a reduce-scatter in flight meanwhile on
// the data-parallel one would be two NCCL communicators in flight at once on
// one GPU, which NCCL does not promise to make progress (NCCL user guide,
// "Using multiple NCCL communicators concurrently"; gpt_training_reductions.cpp,
// buckets_overlap_backward).
// Then, as the CPU engine's step: the gradient norm is global (each rank's
// sum of squares over its shard, all-reduced in rank order, then over the
// tensor-parallel group, counting a replicated parameter on its tp rank 0
// only, then over a pipeline's stages, counting a tied embedding's copy on
// the last stage not at all: global_sum_of_squares.h), AdamW updates
// the shard's pieces on the device (cuda/adamw.h, each piece with its
// parameter's weight decay; the scalars and clipping of adamw_step.h) and
// rounds them into the shard's bf16 parameters, and the parameters are
// all-gathered in place. A norm that is not finite skips the update and the gather.
// With --cpu-offload the shard's optimizer is on the host instead (ZeRO-Offload, zero_offload.h),
// under either plugin: hybrid_parallel's offloads its shard of the rank's part.
//
// The categories are the planner's (planner/memory_model.cpp,
// add_zero_states; two buckets by planner::zero_reduce_buckets), booked by
// the caching allocator. Every kernel and copy is on the legacy default
// stream, where the step's kernels run; the communicator's calls wait for it
// first (comm/nccl.h). Never run on a GPU: tests/cuda/zero_gpu_test.cpp
// checks it, the overlapped buckets included, against the CPU engine's ZeRO.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/engine/device/device_block.h"
#include "zero_offload.h"
#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/half.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/engine/parallel/zero_overlap.h"
#include "tessera/planner/model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine::cuda {

class ZeroShards {
 public:
  // Allocates the shard's states (on the host with plugin.cpu_offload,
  // booked in `ledger`) and the stage's gradient buffers for `group` (2 or
  // more ranks) and `plugin` (low_level_zero, or hybrid_parallel, stage 1 or
  // 2). `params`: the device's bf16 parameters, padded_flat_numel elements.
  // `decay[p]`: whether flat parameter p takes weight decay.
  // `tensor_group` and `pipeline_group`: hybrid_parallel's tensor-parallel
  // ranks and pipeline stages (null: none), of which `model` is this rank's
  // part (its stage's tensors, a tied embedding's copy marked: planner::stage_model).
  ZeroShards(CachingAllocator& allocator, MemoryLedger& ledger, comm::Communicator& group, const planner::Model& model, const planner::PluginOptions& plugin,
             std::vector<bool> decay, const OptimizerOptions& options, bf16* params, comm::Communicator* tensor_group,
             comm::Communicator* pipeline_group);

  // The master weights' shard from the whole model's fp32 weights (flat order, on the host).
  Status start_from(const std::vector<float>& weights);

  // The full flat gradient buffer backward adds into, or null (stage 2 with
  // a smaller bucket: before_backward binds each layer's gradients).
  bf16* full_gradients() const { return full_gradients_.as<bf16>(); }
  // Before the step's first backward.
  Status zero_gradients();
  // Around each layer's backward (a block index, num_layers for the head,
  // planner::kEmbeddingLayer for the embeddings), in every backward: stage 2
  // with buckets binds `gradient_of` (flat parameter -> its gradient) to the
  // layer's places in one and starts a bucket's reduction when it is full;
  // stage 1 starts the pieces the layer completed in the step's last backward.
  Status before_backward(int layer, std::vector<bf16*>& gradient_of);
  Status after_backward(int layer, bool last_backward);
  // After the step's last backward: this rank's gradient shard holds the sum over ranks.
  Status reduce();
  // The update: the global gradient norm before clipping, or nullopt (not
  // finite: no update). `sum_workspace` (sum_of_squares_workspace_bytes of
  // the model) and `device_sum` (a double and the overflow flag) are device scratch.
  Result<std::optional<double>> step(void* sum_workspace, double* device_sum);

  // This rank's optimizer state, for checkpoints: its layout, and copies to
  // and from a host state of that layout; restore() rounds the weights into
  // the shard's parameters and all-gathers them (collective).
  const planner::OptimizerLayout& layout() const { return layout_; }
  Status save(FlatAdamWState& state);
  Status restore(FlatAdamWState& state);
  // The reduced gradient shard the last step's update read, copied into `host` (shard elements).
  Status copy_gradient_shard(std::vector<bf16>& host) const;

 private:
  bf16* shard_parameters() const;
  bf16* shard_gradients() const;

  comm::Communicator& group_;
  comm::Communicator* tensor_group_;  // null: no tensor parallelism
  comm::Communicator* pipeline_group_;  // null: no pipeline
  planner::OptimizerLayout layout_;
  std::vector<std::pair<int64_t, int64_t>> norm_runs_;  // the ranges of the shard the gradient norm counts (gradient_norm_runs)
  std::vector<bool> decay_;
  OptimizerOptions options_;
  int stage_ = 1;
  int64_t shard_ = 0, padded_ = 0;
  bf16* params_ = nullptr;
  int64_t steps_ = 0;
  DeviceBlock master_, exp_avg_, exp_avg_sq_;  // on the device, or:
  std::unique_ptr<OffloadedShard> offloaded_;  // --cpu-offload: on the host
  DeviceBlock full_gradients_;  // stage 1 (gradients), stage 2 with a whole-model bucket (comm_buffers)
  DeviceBlock bucket_;          // stage 1, and stage 2 with smaller buckets: the reduce buckets (zero_buffers)
  DeviceBlock gradient_shard_;  // stage 2
  std::unique_ptr<ZeroReductionMemory> reduction_memory_;  // the buckets' device copies and additions
  std::optional<OverlappedZero1> zero1_;  // stage 1
  bool overlapped_ = false;               // stage 1 with two buckets: pieces start in the last backward
  std::optional<OverlappedZero2> zero2_;  // stage 2 with smaller buckets
};

}  // namespace tessera::engine::cuda
