// What the tests of the GPU step's sharded memories (device/gemini_device_chunks.h,
// device/fsdp_device_units.h) run them on: heap memory under the caching
// allocator, ranks as threads whose collectives exchange through shared
// pointers (Peers), and the model's weights, small integers exact in bf16,
// in a step the planner estimates (planner_row);
// and what they check before each layer runs: each parameter the layer uses
// bound to those weights, its gradient too in backward, where each rank adds
// rank + 1 into every element (so that the reduced sums are known).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tessera/engine/device/memory_source.h"
#include "tessera/engine/half.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine::testing {

// Real heap memory behind the caching allocators (the fakes' addresses cannot be written).
class HeapMemory final : public MemorySource {
 public:
  void* allocate(int64_t bytes) override { return std::malloc(static_cast<size_t>(bytes)); }
  void release(void* memory) override { std::free(memory); }
};

// The ranks' threads: each collective publishes every rank's buffer, then
// each rank reads the others' (all ranks make the same calls in one order).
class Peers {
 public:
  explicit Peers(int ranks) : barrier_(ranks), buffers_(static_cast<size_t>(ranks)) {}
  // `whole` (ranks · shard) gathered in place from every rank's slot.
  void all_gather(int rank, bf16* whole, int64_t shard) {
    publish(rank, whole);
    for (size_t r = 0; r < buffers_.size(); ++r) {
      if (static_cast<int>(r) != rank) std::copy_n(buffers_[r] + static_cast<int64_t>(r) * shard, shard, whole + static_cast<int64_t>(r) * shard);
    }
    barrier_.arrive_and_wait();
  }
  // `whole` (ranks · n) summed over the ranks in rank order; this rank's n
  // elements of the sum written to `out` (which may be its slot of `whole`).
  void reduce_scatter(int rank, const bf16* whole, bf16* out, int64_t n) {
    publish(rank, whole);
    std::vector<bf16> sum(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float s = 0;  // the tests' values are small integers, exact in bf16
      for (const bf16* peer : buffers_) s += widen(peer[rank * n + i]);
      sum[static_cast<size_t>(i)] = narrow<bf16>(s);
    }
    barrier_.arrive_and_wait();  // every rank has read before any writes
    std::copy(sum.begin(), sum.end(), out);
  }

 private:
  void publish(int rank, const bf16* buffer) {
    buffers_[static_cast<size_t>(rank)] = buffer;
    barrier_.arrive_and_wait();
  }
  std::barrier<> barrier_;
  std::vector<const bf16*> buffers_;
};

// The planner's estimate of the step these tests run as the GPU step runs
// it (the tessera_gpu profile: its host blocks pinned): `ranks`
// data-parallel ranks in bf16, `micro_batches` of one 8-token sequence, on
// an H100 (with `device_bytes` of memory where given).
inline planner::MemoryEstimate planner_estimate(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, int micro_batches,
                                                int64_t device_bytes = 0) {
  planner::EstimateRequest request;
  request.layout.dp = ranks;
  request.plugin = plugin;
  request.training.precision = planner::Precision::bf16;
  request.training.micro_batch_size = 1;
  request.training.seq_len = 8;
  request.training.num_micro_batches = micro_batches;
  request.training.activation_profile = planner::ActivationProfile::tessera_gpu;
  planner::GpuProfile gpu = planner::load_gpu("h100-80g").value();
  if (device_bytes > 0) gpu.memory_bytes = device_bytes;
  auto estimate = planner::estimate_memory(model, gpu, request);
  EXPECT_TRUE(estimate.ok()) << estimate.error().message;
  return estimate.value();
}

// Rank 0's row of that estimate.
inline planner::RankMemory planner_row(const planner::Model& model, const planner::PluginOptions& plugin, int ranks, int micro_batches) {
  return planner_estimate(model, plugin, ranks, micro_batches).ranks.at(0);
}

// The model's weight at flat element i: a small integer, exact in bf16, never 0.
inline float weight_at(int64_t i) { return static_cast<float>(i % 29 + 1); }

// `uses[layer + 1]`: the flat parameters `layer` uses (planner::parameters_by_layer).
inline void check_layer_bound(const std::vector<std::vector<int>>& uses, const std::vector<planner::FlatParameter>& order, const std::vector<bf16*>& parameter_of,
                              const std::vector<bf16*>& gradient_of, int layer, bool backward, int rank) {
  for (const int p : uses[static_cast<size_t>(layer + 1)]) {
    const planner::FlatParameter& f = order[static_cast<size_t>(p)];
    const bf16* w = parameter_of[static_cast<size_t>(p)];
    if (w == nullptr) {
      ADD_FAILURE() << "parameter " << p << " not bound at layer " << layer;
      continue;
    }
    int64_t wrong = 0;
    for (int64_t k = 0; k < f.numel; ++k) wrong += widen(w[k]) != weight_at(f.offset + k) ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "weights of parameter " << p << " at layer " << layer;
    if (!backward) continue;
    bf16* g = gradient_of[static_cast<size_t>(p)];
    if (g == nullptr) {
      ADD_FAILURE() << "no gradient of " << p << " at layer " << layer;
      continue;
    }
    for (int64_t k = 0; k < f.numel; ++k) g[k] = narrow<bf16>(widen(g[k]) + static_cast<float>(rank + 1));
  }
}

}  // namespace tessera::engine::testing
