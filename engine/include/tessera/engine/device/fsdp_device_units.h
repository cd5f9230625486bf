// FSDP's units in the GPU step's memory (src/cuda/fsdp_shards.h): what each
// move of the shared schedule (parallel/fsdp_schedule.h, the CPU engine's
// too) allocates, copies, reduces and frees, as plain host code over an
// interface of device operations (FsdpUnitOps: CUDA's and NCCL's in the GPU
// step, ranks emulated by threads in the tests), so that which unit is
// gathered and reduced when, and every booking, is checked on the CPU.
//
// The buffers and their categories are the planner's (planner/memory_model.cpp,
// add_fsdp_states, over planner::fsdp_layout, the units the CPU engine shards):
//  - this rank's shard of every unit, back to back (shard_numel elements):
//    the fp32 weights (`parameters`: under FSDP's MixedPrecision they are the
//    optimizer's weights, no master copy), the fp32 gradients (`gradients`)
//    and AdamW's two states (`optimizer_states`);
//  - a gathered unit (`chunk_buffers`, its padded elements in bf16): this
//    rank's shard cast into its slot on the compute stream, then its
//    all-gather started in place (on the communicator's stream, after the
//    compute stream's work so far: comm/nccl.h) and finished when the unit
//    is bound, so that a prefetched unit's gather runs while the current
//    unit computes; freed when the schedule releases it;
//  - a unit's unsharded bf16 gradient (`comm_buffers`), zeroed when opened;
//    on `reduce` its reduce-scatter is started in place, and finished later,
//    when this rank's reduced slot is added into the fp32 gradient shard on
//    the compute stream and the buffer freed: before another gradient
//    buffer is opened, so at most the root's and one block's gradient
//    buffers exist, as the planner counts them (a block's reduction runs
//    under the gathers started before the next block's backward, block 0's
//    under the embeddings' backward; the root's is finished when the next
//    micro-batch binds the root, or after the step's last backward).
//    Started calls finish in the order started (comm/communicator.h).
// With CPU offload (FsdpHostShards: torch_fsdp's cpu_offload, planner/
// fsdp_offload.h) the fp32 weight and gradient shards are the caller's, in
// pinned host memory, and nothing of them is kept on the device: a gather
// copies the unit's fp32 shard up into a device buffer of its own
// (`parameters`) and casts it from there into its slot; a finished reduction
// widens this rank's reduced slot into a device fp32 buffer (`gradients`)
// and copies it down over the unit's host gradient shard. One micro-batch a
// step, as FSDP offloads (it does not accumulate: planner::
// check_fsdp_offload_accumulation), so the copy down is the step's gradient.
// Every buffer comes from the caching allocator, so the ledger's device peaks
// per category are the planner's estimate, each block rounded up to 512 bytes.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "tessera/engine/device/caching_allocator.h"
#include "tessera/engine/device/device_block.h"
#include "tessera/engine/half.h"
#include "tessera/engine/parallel/fsdp_schedule.h"
#include "tessera/planner/model.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

// The device operations the moves need. The compute stream's run in its order.
class FsdpUnitOps {
 public:
  virtual ~FsdpUnitOps() = default;
  virtual Status zero(void* device, int64_t bytes) = 0;                              // compute stream
  virtual Status cast_shard(bf16* slot, const float* shard, int64_t n) = 0;          // compute stream: slot = bf16(shard)
  virtual Status add_into_shard(float* shard, const bf16* reduced, int64_t n) = 0;   // compute stream: shard += reduced
  // Over the data-parallel ranks, started: `unit` (ranks · shard) gathered in
  // place from this rank's slot; `unit` summed over the ranks into this
  // rank's slot. finish_oldest() waits for the oldest started call.
  virtual Status start_all_gather(bf16* unit, int64_t shard) = 0;
  virtual Status start_reduce_scatter(bf16* unit, int64_t shard) = 0;
  virtual Status finish_oldest() = 0;
  // Offload: copies between the device and pinned host memory, on the compute stream.
  virtual Status copy_up(void* device, const void* host, int64_t bytes) = 0;
  virtual Status copy_down(void* host, const void* device, int64_t bytes) = 0;
};

// The offloaded shards (layout().shard_numel fp32 elements each), pinned host memory the caller owns.
struct FsdpHostShards {
  float* weights = nullptr;
  float* gradients = nullptr;
};

class FsdpDeviceUnits {
 public:
  // The shards of `model`'s units (planner::fsdp_layout) for `rank` of
  // `ranks`, zeroed (the caller fills the weights); `parameter_of` and
  // `gradient_of` (per flat parameter) get each parameter's place in its
  // gathered unit and open gradient, null elsewhere. With `host` the shards
  // are there and the optimizer's states the caller's too.
  FsdpDeviceUnits(const planner::Model& model, planner::FsdpStrategy strategy, int rank, int ranks, CachingAllocator& allocator, FsdpUnitOps& ops,
                  std::vector<bf16*>& parameter_of, std::vector<bf16*>& gradient_of, const FsdpHostShards* host = nullptr);
  ~FsdpDeviceUnits();
  FsdpDeviceUnits(const FsdpDeviceUnits&) = delete;
  FsdpDeviceUnits& operator=(const FsdpDeviceUnits&) = delete;

  // Around `layer`'s forward and backward (planner::kEmbeddingLayer .. num_layers, the head), in every micro-batch.
  Status before_forward(int layer) { return apply(schedule_.before_forward(layer)); }
  Status after_forward(int layer) { return apply(schedule_.after_forward(layer)); }
  Status before_backward(int layer) { return apply(schedule_.before_backward(layer)); }
  Status after_backward(int layer) { return apply(schedule_.after_backward(layer)); }
  // After the step's last backward: every started call finished, the reductions into the gradient shard.
  Status finish_reductions();
  // Before the step's first forward.
  Status zero_gradients();

  const planner::FsdpLayout& layout() const { return layout_; }
  const std::vector<planner::FlatParameter>& order() const { return order_; }
  const FsdpSchedule& schedule() const { return schedule_; }
  size_t calls_in_flight() const { return in_flight_.size(); }
  // This rank's shards (layout().shard_numel fp32 elements each): on the device, or the offloaded ones on the host.
  float* weights() const { return offloaded() ? host_.weights : weights_.as<float>(); }
  float* gradients() const { return offloaded() ? host_.gradients : gradients_.as<float>(); }
  bool offloaded() const { return host_.weights != nullptr; }
  float* exp_avg() const { return exp_avg_.as<float>(); }
  float* exp_avg_sq() const { return exp_avg_sq_.as<float>(); }

 private:
  struct StartedCall {
    int unit;
    bool reduction;        // a reduce-scatter, or an all-gather
    DeviceBlock gradient;  // a reduction's unsharded gradient, this rank's slot reduced in place
  };
  const planner::ShardedUnit& unit(int u) const { return layout_.units[static_cast<size_t>(u + 1)]; }
  Status apply(const std::vector<FsdpMove>& moves);
  void gather(int u);
  void bind(int u);
  void release(int u);
  void finish_oldest();
  // This rank's reduced slot of unit u into its gradient shard.
  void add_reduced(int u, const bf16* reduced);
  // Finishes the started calls, oldest first, up to the last one `until` holds.
  template <typename Until>
  void finish_through(Until until);
  bool run(const Status& status);  // keeps the first error; false once there is one

  int rank_ = 0, ranks_ = 1;
  CachingAllocator& allocator_;
  FsdpUnitOps& ops_;
  std::vector<bf16*>& parameter_of_;
  std::vector<bf16*>& gradient_of_;
  std::vector<planner::FlatParameter> order_;
  planner::FsdpLayout layout_;
  FsdpSchedule schedule_;
  std::vector<std::vector<int64_t>> offsets_;  // per unit, each parameter's offset in the unit's flat buffer
  FsdpHostShards host_;  // offloaded shards, or none
  DeviceBlock weights_, gradients_, exp_avg_, exp_avg_sq_;
  std::vector<DeviceBlock> gathered_, unit_gradients_;  // per unit (index unit + 1)
  std::deque<StartedCall> in_flight_;                   // started calls, oldest first
  Status error_ = Status::success();
};

}  // namespace tessera::engine
