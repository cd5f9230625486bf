// The offload buffers' pinned blocks (planner/pinned_host_blocks.h): the
// pinned allocator's power-of-two sizes, applied to the host figures of a
// GPU run of the engine (the tessera_gpu profile), not to the CPU engine's
// pageable buffers nor to ColossalAI's LowLevelZero offload (PyTorch FSDP's
// per-unit and per-parameter blocks: fsdp_offload_test.cpp).
#include "tessera/planner/pinned_host_blocks.h"

#include <gtest/gtest.h>

#include <bit>

#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

TEST(PinnedHostBlocks, ABlockIsHeldAtTheNextPowerOfTwo) {
  EXPECT_EQ(pinned_block_bytes(0), 0);
  EXPECT_EQ(pinned_block_bytes(1), 1);
  EXPECT_EQ(pinned_block_bytes(1000), 1024);
  EXPECT_EQ(pinned_block_bytes(1024), 1024);
  EXPECT_EQ(pinned_block_bytes(1025), 2048);
  EXPECT_EQ(pinned_block_bytes(248'879'616), 268'435'456);
}

EstimateRequest offloaded(PluginKind kind, int64_t dp, ActivationProfile profile) {
  EstimateRequest r;
  r.plugin.kind = kind;
  if (kind == PluginKind::low_level_zero || kind == PluginKind::hybrid_parallel) r.plugin.zero_stage = 2;
  r.plugin.cpu_offload = true;
  r.layout.dp = dp;
  r.training.precision = Precision::bf16;
  r.training.activation_profile = profile;
  return r;
}

int64_t host(const Model& model, const EstimateRequest& r, Cat category) {
  return estimate_or_fail(model, shipped_gpu("h100-80g"), r).ranks.at(0).bytes[category].host;
}

// GPT-2's 124,439,808 parameters on 2 ranks: a ZeRO shard of 62,219,904,
// whose fp32 gradients (248,879,616 bytes) the GPU step pins in a block of
// 2^28; Llama-2-7B's 842,301,952 on 8 ranks, 3,369,207,808 bytes, in 2^32.
TEST(PinnedHostBlocks, ZeroOffloadsGradientShardIsPinnedOnlyInTheGpuStep) {
  const Model gpt2 = shipped_model("gpt2");
  const Model llama7b = shipped_model("llama-2-7b");
  EXPECT_EQ(host(gpt2, offloaded(PluginKind::low_level_zero, 2, ActivationProfile::tessera_gpu), Cat::gradients), 268'435'456);
  EXPECT_EQ(host(gpt2, offloaded(PluginKind::low_level_zero, 2, ActivationProfile::tessera), Cat::gradients), 248'879'616);
  EXPECT_EQ(host(gpt2, offloaded(PluginKind::low_level_zero, 2, ActivationProfile::flash), Cat::gradients), 248'879'616);
  EXPECT_EQ(host(llama7b, offloaded(PluginKind::low_level_zero, 8, ActivationProfile::tessera_gpu), Cat::gradients), int64_t{1} << 32);
  EXPECT_EQ(host(llama7b, offloaded(PluginKind::hybrid_parallel, 8, ActivationProfile::tessera_gpu), Cat::gradients), int64_t{1} << 32);
  EXPECT_EQ(host(llama7b, offloaded(PluginKind::low_level_zero, 8, ActivationProfile::tessera), Cat::gradients), 3'369'207'808);
  // The master weights and states stay pageable, exact.
  EXPECT_EQ(host(llama7b, offloaded(PluginKind::low_level_zero, 8, ActivationProfile::tessera_gpu), Cat::optimizer_states), 8 * int64_t{842'301'952});
}

// FSDP on Llama-2-7B over 8 ranks: the GPU step pins the rank's whole shard
// (3,369,207,808 bytes) in one block of 2^32 for the weights and one for the
// gradients; the CPU engine holds them exactly.
TEST(PinnedHostBlocks, FsdpOffloadsShardsArePinnedWholeInTheGpuStep) {
  const Model llama7b = shipped_model("llama-2-7b");
  for (const Cat category : {Cat::parameters, Cat::gradients}) {
    EXPECT_EQ(host(llama7b, offloaded(PluginKind::torch_fsdp, 8, ActivationProfile::tessera_gpu), category), int64_t{1} << 32);
    EXPECT_EQ(host(llama7b, offloaded(PluginKind::torch_fsdp, 8, ActivationProfile::tessera), category), 3'369'207'808);
  }
}

// Gemini with every chunk on the host: each chunk's 16-bit weight and
// gradient shards are a pinned block each in the GPU step.
TEST(PinnedHostBlocks, GeminiHostShardsArePinnedChunkByChunkInTheGpuStep) {
  const Model gpt2 = shipped_model("gpt2");
  EstimateRequest r = offloaded(PluginKind::gemini, 2, ActivationProfile::tessera_gpu);
  r.plugin.cpu_offload = false;  // Gemini offloads by its placement
  r.plugin.gemini.placement_policy = GeminiPlacement::cpu;
  const MemoryEstimate gpu = estimate_or_fail(gpt2, shipped_gpu("h100-80g"), r);
  r.training.activation_profile = ActivationProfile::tessera;
  const MemoryEstimate cpu = estimate_or_fail(gpt2, shipped_gpu("h100-80g"), r);
  int64_t pinned = 0, exact = 0;
  for (const int64_t capacity : gpu.gemini->chunk_capacity) {
    exact += capacity / 2 * 2;
    pinned += static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(capacity / 2 * 2)));
  }
  EXPECT_GT(pinned, exact);
  for (const Cat category : {Cat::parameters, Cat::gradients}) {
    EXPECT_EQ(gpu.ranks.at(0).bytes[category].host, pinned);
    EXPECT_EQ(cpu.ranks.at(0).bytes[category].host, exact);
  }
}

int64_t pinned_sum(const std::vector<int64_t>& chunk_capacity, int64_t dp, int64_t bytes_per_element) {
  int64_t sum = 0;
  for (const int64_t capacity : chunk_capacity) sum += pinned_block_bytes(capacity / dp * bytes_per_element);
  return sum;
}

// ColossalAI's own Gemini on 2 ranks (a runtime profile, not the engine's) under `placement`.
EstimateRequest colossalai_gemini(GeminiPlacement placement) {
  EstimateRequest r = offloaded(PluginKind::gemini, 2, ActivationProfile::flash);
  r.plugin.cpu_offload = false;  // Gemini offloads by its placement
  r.plugin.gemini.placement_policy = placement;
  return r;
}

// ColossalAI's own Gemini (a runtime profile, not Tessera's engine) under its
// default pin_memory: every chunk keeps pinned host shards of its 16-bit
// weights, its gradients and its fp32 master weights, even with the whole
// model on the device; off, a device-only placement holds nothing on the host.
TEST(PinnedHostBlocks, ColossalAIGeminiPinsAHostCopyOfEveryChunk) {
  const Model gpt2 = shipped_model("gpt2");
  EstimateRequest r = colossalai_gemini(GeminiPlacement::cuda);
  const MemoryEstimate pinned = estimate_or_fail(gpt2, shipped_gpu("h100-80g"), r);
  const std::vector<int64_t>& chunks = pinned.gemini->chunk_capacity;
  const RankMemory& row = pinned.ranks.at(0);
  EXPECT_EQ(row.bytes[Cat::parameters].host, pinned_sum(chunks, 2, 2));
  EXPECT_EQ(row.bytes[Cat::gradients].host, pinned_sum(chunks, 2, 2));
  EXPECT_EQ(row.bytes[Cat::master_weights].host, pinned_sum(chunks, 2, 4));
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, 0);
  EXPECT_GT(row.bytes[Cat::master_weights].host, pinned.gemini->padded_elements() / 2 * 4);
  EXPECT_EQ(row.bytes[Cat::master_weights].device, pinned.gemini->padded_elements() / 2 * 4);  // the device copy stays

  r.plugin.pin_memory = false;  // enable_async_reduce=False
  const RankMemory unpinned = estimate_or_fail(gpt2, shipped_gpu("h100-80g"), r).ranks.at(0);
  EXPECT_EQ(unpinned.host_total, 0);
  EXPECT_EQ(unpinned.device_total, row.device_total);

  // Tessera's engine pins only what it offloads, whatever the flag says.
  r.plugin.pin_memory = true;
  r.training.activation_profile = ActivationProfile::tessera_gpu;
  EXPECT_EQ(estimate_or_fail(gpt2, shipped_gpu("h100-80g"), r).ranks.at(0).host_total, 0);
}

// With everything offloaded, ColossalAI's pinned shards are the host's only
// copies of the weights, gradients and master weights; the optimizer's
// moments beside them stay pageable, exact.
TEST(PinnedHostBlocks, ColossalAIGeminiOffloadedMomentsStayPageable) {
  const MemoryEstimate e = estimate_or_fail(shipped_model("gpt2"), shipped_gpu("h100-80g"), colossalai_gemini(GeminiPlacement::cpu));
  const RankMemory& row = e.ranks.at(0);
  EXPECT_EQ(row.bytes[Cat::parameters].host, pinned_sum(e.gemini->chunk_capacity, 2, 2));
  EXPECT_EQ(row.bytes[Cat::master_weights].host, pinned_sum(e.gemini->chunk_capacity, 2, 4));
  EXPECT_EQ(row.bytes[Cat::master_weights].device, 0);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, e.gemini->padded_elements() / 2 * 8);
}

}  // namespace
}  // namespace tessera::planner
