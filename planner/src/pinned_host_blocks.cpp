#include "tessera/planner/pinned_host_blocks.h"

#include <bit>

#include "tessera/planner/gemini_static_placement.h"

namespace tessera::planner {

int64_t pinned_block_bytes(int64_t bytes) {
  return bytes <= 0 ? 0 : static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(bytes)));
}

PinnedHostBlock zero_offload_transfer_block(int64_t shard_numel) { return {MemoryCategory::gradients, shard_numel * 4}; }

FsdpOffloadBlocks fsdp_offload_blocks(int64_t shard_numel) {
  return {{MemoryCategory::parameters, shard_numel * 4}, {MemoryCategory::gradients, shard_numel * 4}};
}

std::vector<PinnedHostBlock> fsdp1_offload_pinned_blocks(const FsdpLayout& layout) {
  std::vector<PinnedHostBlock> blocks;
  for (const ShardedUnit& unit : layout.units) {
    const FsdpOffloadBlocks b = fsdp_offload_blocks(unit.shard);
    blocks.push_back(b.weights);
    blocks.push_back(b.gradients);
  }
  return blocks;
}

GeminiChunkHostBlocks gemini_chunk_host_blocks(int64_t shard, bool shards_on_host, bool optimizer_on_host, int64_t parameter_bytes,
                                               int64_t gradient_bytes) {
  GeminiChunkHostBlocks b{{MemoryCategory::parameters, 0}, {MemoryCategory::gradients, 0}, {MemoryCategory::gradients, 0}};
  if (shards_on_host) {
    b.weights.bytes = shard * parameter_bytes;
    b.gradients.bytes = shard * gradient_bytes;
  }
  if (exchanges_through_host(optimizer_on_host, shards_on_host)) b.exchange.bytes = shard * gradient_bytes;
  return b;
}

std::vector<PinnedHostBlock> colossalai_gemini_pinned_blocks(int64_t shard, int64_t parameter_bytes, int64_t gradient_bytes,
                                                             int64_t master_bytes) {
  return {{MemoryCategory::parameters, shard * parameter_bytes},
          {MemoryCategory::gradients, shard * gradient_bytes},
          {MemoryCategory::master_weights, shard * master_bytes}};
}

bool colossalai_pins_every_chunk(const PluginOptions& plugin, const TrainingOptions& training) {
  return plugin.kind == PluginKind::gemini && plugin.pin_memory && !is_tessera_engine(training.activation_profile);
}

std::vector<PinnedHostBlock> deepspeed_offload_gradient_blocks(const std::vector<int64_t>& partitions, int64_t sub_group_size,
                                                               int64_t gradient_bytes) {
  int64_t total = 0;
  for (const int64_t p : partitions) total += p;
  std::vector<PinnedHostBlock> blocks{{MemoryCategory::gradients, total * gradient_bytes}};
  int64_t group = 0;
  for (size_t i = 0; i < partitions.size(); ++i) {
    group += partitions[i];
    if (group >= sub_group_size || i + 1 == partitions.size()) {
      blocks.push_back({MemoryCategory::gradients, group * 4});
      group = 0;
    }
  }
  return blocks;
}

void add_host_blocks(const std::vector<PinnedHostBlock>& blocks, HostBlockSizing sizing, MemoryBreakdown& out) {
  for (const PinnedHostBlock& b : blocks) out.add(b.category, MemorySpace::host, sizing == HostBlockSizing::pinned ? pinned_block_bytes(b.bytes) : b.bytes);
}

}  // namespace tessera::planner
