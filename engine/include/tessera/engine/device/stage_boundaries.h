// A GPU pipeline stage's point-to-point buffers (parallel/pipeline_transfers.h),
// booked as the planner books them (memory_model.cpp, add_activations;
// Megatron-LM's p2p): per neighbouring stage one activation and one gradient
// of `bytes` (the micro-batch's residual stream, b·s·h in bf16), under
// comm_buffers. The first stage has no previous neighbour, the last no next;
// under the interleaved schedule (`chunks` > 1) every stage has both (the
// wrap-around: chunk j of the last stage feeds chunk j + 1 of the first).
// The CPU engine's PipelineStage keeps the same four (parallel/pipeline.h).
#pragma once

#include <cstdint>

#include "tessera/engine/device/device_block.h"

namespace tessera::engine {

struct StageBoundaries {
  DeviceBlock recv_activation, send_gradient;  // from and back to the previous stage
  DeviceBlock send_activation, recv_gradient;  // to and back from the next stage

  StageBoundaries() = default;
  StageBoundaries(CachingAllocator& allocator, int64_t bytes, bool first, bool last, int64_t chunks) {
    const bool interleaved = chunks > 1;
    if (!first || interleaved) {
      recv_activation = DeviceBlock(allocator, bytes, MemoryCategory::comm_buffers);
      send_gradient = DeviceBlock(allocator, bytes, MemoryCategory::comm_buffers);
    }
    if (!last || interleaved) {
      send_activation = DeviceBlock(allocator, bytes, MemoryCategory::comm_buffers);
      recv_gradient = DeviceBlock(allocator, bytes, MemoryCategory::comm_buffers);
    }
  }
};

}  // namespace tessera::engine
