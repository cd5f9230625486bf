// The GPU step's pinned offload buffers, taken from its pinned allocator as
// planner/pinned_host_blocks.h lists them, so that the ledger's host bytes
// per category are the planner's for a GPU plan: ZeRO-Offload's transfer
// buffer (src/cuda/zero_offload.h) and FSDP's offloaded shards
// (src/cuda/fsdp_shards.h). Gemini's host blocks are taken by
// device/gemini_device_chunks.h. Plain host code, tested with fake pinned
// memory; the memory is left as it comes (the callers fill it).
#pragma once

#include <cstdint>

#include "tessera/engine/device/fsdp_device_units.h"
#include "tessera/engine/device/pinned_host_allocator.h"

namespace tessera::engine {

// A rank's fp32 gradient shard of `shard_numel` elements (planner::zero_offload_transfer_block).
float* allocate_zero_offload_transfer(PinnedHostAllocator& host, int64_t shard_numel);

// The weight and gradient shards of `shard_numel` fp32 elements each (planner::fsdp_offload_blocks).
FsdpHostShards allocate_fsdp_host_shards(PinnedHostAllocator& host, int64_t shard_numel);

}  // namespace tessera::engine
