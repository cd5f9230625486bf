// FSDP's CPU offload (torch_fsdp with cpu_offload): what stays on the host,
// what crosses PCIe and when, for the memory model, the simulator and both
// engines' FSDP (parallel/fsdp.h, device/fsdp_device_units.h).
//
// The runtimes:
//  - PyTorch FSDP1 with CPUOffload(offload_params=True), which ColossalAI's
//    TorchFSDPPlugin passes through (colossalai/booster/plugin/
//    torch_fsdp_plugin.py at 014837e7, TorchFSDPModel; configure re-creates
//    the optimizer over the wrapped module's parameters, so it steps on the
//    CPU): each flat parameter's fp32 shard and its fp32 gradient `_cpu_grad`
//    live in pinned host memory (torch/distributed/fsdp/_flat_param.py at
//    01caf79e; counted at the pinned allocator's powers of two,
//    pinned_host_blocks.h). Before a unit's all-gather its shard is copied
//    to the device in fp32 (pre_unshard: flat_param_to, or under MixedPrecision
//    _use_low_precision_shard, which casts it there into _mp_shard) and freed
//    after; after its reduce-scatter the gradient shard, cast to the fp32 of
//    the parameters, is copied down into _cpu_grad, which the post-backward
//    callback waits for (torch/distributed/fsdp/_runtime_utils.py at 00ae0bc9,
//    _post_backward_hook; _offload_grad in later versions). Gradient accumulation
//    outside no_sync() "does not work with CPU offloading" (_flat_param.py,
//    prepare_gradient_for_backward): each micro-batch's gradient replaces
//    the last, and TorchFSDPPlugin has no no_sync, so the planner refuses
//    more than one micro-batch there.
//  - FSDP2 with CPUOffloadPolicy (torchtitan's enable_cpu_offload,
//    torchtitan/distributed/fsdp.py at 01e1814a, apply_fsdp_to_decoder): the
//    sharded parameters and gradients on the host; each all-gather copies its
//    fp32 shards to the device first, and foreach_reduce copies each reduced
//    fp32 gradient shard to the host and adds it there when accumulating
//    (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py at 8fc2039d).
// On the device then: no persistent shard, gradient or optimizer state; the
// gathered units and their unsharded gradients as without offload; and one
// unit's fp32 shard at a time on its way up (`parameters`) and one unit's
// fp32 reduced gradient shard on its way down (`gradients`). The optimizer
// steps on the host over the host shards.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/planner/sharding.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// The fp32 shards cross PCIe in fp32 both ways (see above).
inline constexpr int64_t kFsdpOffloadBytesPerElement = 4;

// The largest unit's shard: what one copy up (or down) holds on the device.
inline int64_t fsdp_offload_staging_numel(const FsdpLayout& layout) {
  int64_t largest = 0;
  for (const ShardedUnit& unit : layout.units) largest = std::max(largest, unit.shard);
  return largest;
}

// One micro-batch's copies of a rank's `shard` elements: up before every
// gather (full_shard gathers every unit again in backward, shard_grad_op
// keeps it from its forward), down after every reduce-scatter.
struct FsdpOffloadTraffic {
  double forward_up_bytes = 0;
  double backward_up_bytes = 0;
  double backward_down_bytes = 0;
};

inline FsdpOffloadTraffic fsdp_offload_traffic(double shard, FsdpStrategy strategy) {
  const double bytes = shard * static_cast<double>(kFsdpOffloadBytesPerElement);
  return {bytes, strategy == FsdpStrategy::full_shard ? bytes : 0.0, bytes};
}

}  // namespace tessera::planner
