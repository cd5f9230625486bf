// The GPU step's pinned offload buffers (device/offload_host_blocks.h),
// taken from the pinned allocator over fake pinned memory as
// src/cuda/zero_offload.cpp and fsdp_shards.cpp take them, for ZeRO-Offload
// at stages 1 and 2 and for FSDP's CPU offload, on GPT-2 124M and
// Llama-2-7B over 2 and 8 ranks: the ledger's host bytes per pinned
// category are the planner's estimate of the same GPU run
// (planner/pinned_host_blocks.h), each block the power of two at or above
// the shard's bytes. (The host optimizer's master weights and states are
// pageable and booked by Optimizer: hybrid_zero_part_test.cpp.)
#include "tessera/engine/device/offload_host_blocks.h"

#include <gtest/gtest.h>

#include <bit>
#include <string>

#include "emulated_ranks.h"
#include "fake_streams.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

using testing::FakeEvents;
using testing::FakeMemory;
using testing::planner_row;  // as the GPU step runs it

constexpr int64_t kPlentyOfHostMemory = int64_t{1} << 40;

planner::PluginOptions zero_offload(int stage) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::low_level_zero;
  plugin.zero_stage = stage;
  plugin.cpu_offload = true;
  return plugin;
}

planner::PluginOptions fsdp_offload() {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_fsdp;
  plugin.cpu_offload = true;
  return plugin;
}

struct Booked {
  int64_t parameters = 0, gradients = 0;
};
Booked booked(const MemoryLedger& ledger) {
  return {ledger.current(MemoryCategory::parameters, MemorySpace::host), ledger.current(MemoryCategory::gradients, MemorySpace::host)};
}

int64_t power_of_two_above(int64_t bytes) { return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(bytes))); }

TEST(OffloadHostBlocks, ZeroOffloadsTransferBufferIsThePlannersHostGradients) {
  for (const char* name : {"gpt2", "llama-2-7b"}) {
    const planner::Model model = planner::load_model(name).value();
    for (const int ranks : {2, 8}) {
      for (const int stage : {1, 2}) {
        const std::string what = std::string(name) + " on " + std::to_string(ranks) + " ranks, stage " + std::to_string(stage);
        const planner::PluginOptions plugin = zero_offload(stage);
        const int64_t shard = planner::optimizer_layout(model, plugin, ranks, 0).shard_numel;
        FakeMemory memory(kPlentyOfHostMemory);
        FakeEvents events;
        MemoryLedger ledger;
        PinnedHostAllocator host(memory, events, ledger);
        float* transfer = allocate_zero_offload_transfer(host, shard);
        const planner::RankMemory row = planner_row(model, plugin, ranks, 1);
        EXPECT_EQ(booked(ledger).gradients, power_of_two_above(4 * shard)) << what;
        EXPECT_EQ(booked(ledger).gradients, row.bytes[MemoryCategory::gradients].host) << what;
        EXPECT_EQ(booked(ledger).parameters, row.bytes[MemoryCategory::parameters].host) << what;
        host.free(transfer);
      }
    }
  }
}

TEST(OffloadHostBlocks, FsdpsOffloadedShardsAreThePlannersHostParametersAndGradients) {
  for (const char* name : {"gpt2", "llama-2-7b"}) {
    const planner::Model model = planner::load_model(name).value();
    for (const int ranks : {2, 8}) {
      const std::string what = std::string(name) + " on " + std::to_string(ranks) + " ranks";
      const int64_t shard = planner::optimizer_layout(model, fsdp_offload(), ranks, 0).shard_numel;
      FakeMemory memory(kPlentyOfHostMemory);
      FakeEvents events;
      MemoryLedger ledger;
      PinnedHostAllocator host(memory, events, ledger);
      const FsdpHostShards shards = allocate_fsdp_host_shards(host, shard);
      const planner::RankMemory row = planner_row(model, fsdp_offload(), ranks, 1);
      EXPECT_EQ(booked(ledger).parameters, power_of_two_above(4 * shard)) << what;
      EXPECT_EQ(booked(ledger).gradients, power_of_two_above(4 * shard)) << what;
      EXPECT_EQ(booked(ledger).parameters, row.bytes[MemoryCategory::parameters].host) << what;
      EXPECT_EQ(booked(ledger).gradients, row.bytes[MemoryCategory::gradients].host) << what;
      host.free(shards.gradients);
      host.free(shards.weights);
    }
  }
}

}  // namespace
}  // namespace tessera::engine
