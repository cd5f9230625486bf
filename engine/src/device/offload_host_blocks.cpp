#include "tessera/engine/device/offload_host_blocks.h"

#include "tessera/planner/pinned_host_blocks.h"

namespace tessera::engine {

float* allocate_zero_offload_transfer(PinnedHostAllocator& host, int64_t shard_numel) {
  const planner::PinnedHostBlock transfer = planner::zero_offload_transfer_block(shard_numel);
  return static_cast<float*>(host.allocate(transfer.bytes, transfer.category));
}

FsdpHostShards allocate_fsdp_host_shards(PinnedHostAllocator& host, int64_t shard_numel) {
  const planner::FsdpOffloadBlocks blocks = planner::fsdp_offload_blocks(shard_numel);
  return {static_cast<float*>(host.allocate(blocks.weights.bytes, blocks.weights.category)),
          static_cast<float*>(host.allocate(blocks.gradients.bytes, blocks.gradients.category))};
}

}  // namespace tessera::engine
