// FSDP's units in the GPU step's memory (device/fsdp_device_units.h), on the
// CPU: "device" memory is heap memory carved by the caching allocator, and
// the ranks are threads whose collectives exchange through shared pointers
// (EmulatedOps; a started all-gather or reduce-scatter exchanges when it is
// finished, as every rank finishes in the order started). One step of 2 micro-batches
// runs on 1, 2 and 3 ranks under full_shard and shard_grad_op, on a tiny
// GPT-2 of awkward sizes (vocabulary 67, width 12, a tied head: every unit
// padded on 2 and 3 ranks) and a tiny Qwen2 (untied head). Checked, on every rank:
//  - which units are gathered and which gradients open at every hook, as
//    parallel/fsdp_schedule.h says (full_shard: the root and at most two
//    blocks, the next one prefetched; shard_grad_op: every unit from its
//    forward to its backward), and the ledger's chunk_buffers and
//    comm_buffers at that moment those buffers' bytes; the prefetched unit's
//    all-gather still in flight while the current unit runs;
//  - before each layer runs, forward and backward, every parameter it uses
//    is bound into its gathered unit holding the model's weights;
//  - after the step, this rank's fp32 gradient shard holds each parameter's
//    contributions summed over ranks, micro-batches and uses (the tied
//    embedding's two), the padding zero, no call left in flight, one
//    all-gather per gather and one reduce-scatter per unit and micro-batch;
//  - the ledger's device peaks per category are the planner's estimate of the
//    same run (planner/memory_model.h, add_fsdp_states): parameters,
//    gradients, optimizer states, chunk_buffers and comm_buffers, each block
//    rounded up to the caching allocator's 512 bytes, no master weights.
// Offloaded (FsdpHostShards; one micro-batch, on 2 and 3 ranks) the same,
// with the shards in host memory: the gradient shard written there whole,
// nothing of the shards kept on the device but one unit's fp32 shard on its
// way up and down (the planner's device parameters and gradients), the fp32
// shard copied up once per gather and every gradient shard down once.
#include "tessera/engine/device/fsdp_device_units.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_streams.h"
#include "emulated_ranks.h"
#include "tessera/engine/device/gpu_plugins.h"
#include "tessera/engine/shard_values.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"

namespace tessera::engine {
namespace {

using planner::FsdpStrategy;
using planner::kRootUnit;
using testing::FakeEvents;
using testing::HeapMemory;
using testing::Peers;
using testing::planner_row;
using testing::weight_at;

constexpr int kMicroBatches = 2;
constexpr int64_t kAlign = CachingAllocator::kBlockAlign;

int64_t booked(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The device operations on host memory, the collectives between the ranks' threads.
class EmulatedOps final : public FsdpUnitOps {
 public:
  EmulatedOps(Peers& peers, int rank) : peers_(peers), rank_(rank) {}
  Status zero(void* device, int64_t bytes) override {
    std::memset(device, 0, static_cast<size_t>(bytes));
    return Status::success();
  }
  Status cast_shard(bf16* slot, const float* shard, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) slot[i] = narrow<bf16>(shard[i]);
    return Status::success();
  }
  Status add_into_shard(float* shard, const bf16* reduced, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) shard[i] += widen(reduced[i]);
    return Status::success();
  }
  Status start_all_gather(bf16* unit, int64_t shard) override {
    started_.push_back({unit, shard, false});
    ++gathers;
    return Status::success();
  }
  Status start_reduce_scatter(bf16* unit, int64_t shard) override {
    started_.push_back({unit, shard, true});
    ++reductions;
    return Status::success();
  }
  Status finish_oldest() override {
    const Started oldest = started_.front();
    started_.pop_front();
    if (oldest.reduction) {
      peers_.reduce_scatter(rank_, oldest.unit, oldest.unit + rank_ * oldest.shard, oldest.shard);
    } else {
      peers_.all_gather(rank_, oldest.unit, oldest.shard);
    }
    return Status::success();
  }
  Status copy_up(void* device, const void* host, int64_t bytes) override {
    std::memcpy(device, host, static_cast<size_t>(bytes));
    bytes_up += bytes;
    return Status::success();
  }
  Status copy_down(void* host, const void* device, int64_t bytes) override {
    std::memcpy(host, device, static_cast<size_t>(bytes));
    bytes_down += bytes;
    return Status::success();
  }
  size_t in_flight() const { return started_.size(); }
  int gathers = 0, reductions = 0;
  int64_t bytes_up = 0, bytes_down = 0;

 private:
  struct Started {
    bf16* unit;
    int64_t shard;
    bool reduction;
  };
  Peers& peers_;
  int rank_;
  std::deque<Started> started_;
};

planner::Model tiny_gpt2() {
  return planner::make_model(
      planner::parse_model_config(R"({"model_type":"gpt2","vocab_size":67,"n_embd":12,"n_layer":3,"n_head":2,"n_positions":9})", "tiny").value());
}

planner::Model tiny_qwen2() {
  return planner::make_model(planner::parse_model_config(R"({"model_type":"qwen2","vocab_size":67,"hidden_size":16,"num_hidden_layers":3,
                                                            "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":26})",
                                                         "tiny")
                                 .value());
}

struct RankResult {
  int64_t peaks[kNumMemoryCategories] = {};
};

// The units a rank should hold gathered, and the gradients open, while `layer` runs.
std::set<int> expected_gathered(FsdpStrategy strategy, int blocks, int layer, bool backward) {
  std::set<int> units{kRootUnit};
  if (layer == planner::kEmbeddingLayer || layer == blocks) {
    if (strategy == FsdpStrategy::shard_grad_op && layer == blocks) {  // every block gathered from its forward to its backward
      for (int b = 0; b < blocks; ++b) units.insert(b);
    }
    return units;
  }
  if (strategy == FsdpStrategy::shard_grad_op) {
    for (int b = 0; b <= layer; ++b) units.insert(b);  // forward: those run so far; backward: those not yet reduced
    return units;
  }
  units.insert(layer);
  const int prefetched = backward ? layer - 1 : layer + 1;
  if (prefetched >= 0 && prefetched < blocks) units.insert(prefetched);
  return units;
}

// One step of `micro_batches` on `rank`: forward from the embeddings to the
// head, backward back, every rank adding rank + 1 into each gradient element
// of each parameter a layer uses; with `offload` the shards in host memory.
// Failures are EXPECTs: a rank that stopped would leave the others waiting in a collective.
RankResult run_rank(const planner::Model& model, FsdpStrategy strategy, Peers& peers, int rank, int ranks, int micro_batches, bool offload) {
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  const std::vector<std::vector<int>> uses = planner::parameters_by_layer(model.inventory);
  const planner::FsdpLayout layout = planner::fsdp_layout(model.inventory, order, ranks);
  const std::vector<planner::ShardPiece> pieces = planner::fsdp_pieces(layout, order, rank);
  const int blocks = static_cast<int>(layout.units.size()) - 1;
  HeapMemory memory;
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator device(memory, events, ledger);
  EmulatedOps ops(peers, rank);
  std::vector<bf16*> parameter_of(order.size()), gradient_of(order.size());
  std::vector<int> times_used(order.size(), 0);
  for (const auto& layer : uses) {
    for (const int p : layer) ++times_used[static_cast<size_t>(p)];
  }
  RankResult result;
  std::vector<float> host_weights(offload ? static_cast<size_t>(layout.shard_numel) : 0), host_gradients(host_weights.size(), -1.0f);
  const FsdpHostShards host{host_weights.data(), host_gradients.data()};
  {
    FsdpDeviceUnits units(model, strategy, rank, ranks, device, ops, parameter_of, gradient_of, offload ? &host : nullptr);
    EXPECT_EQ(units.offloaded(), offload);
    EXPECT_EQ(units.layout().shard_numel, layout.shard_numel);
    std::vector<float> flat(static_cast<size_t>(model.parameter_count));
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = weight_at(static_cast<int64_t>(i));
    flat_values_to_shard(pieces, order, flat.data(), units.weights());
    EXPECT_TRUE(units.zero_gradients().ok());

    // The buffers live at this moment: the schedule's gathered units and open gradients, and the ledger's bytes for them.
    const auto check_live = [&](int layer, bool backward) {
      std::set<int> gathered;
      int64_t gathered_bytes = 0, gradient_bytes = 0;
      for (const planner::ShardedUnit& u : layout.units) {
        if (units.schedule().gathered(u.unit)) {
          gathered.insert(u.unit);
          gathered_bytes += booked(2 * u.padded);
        }
        if (units.schedule().gradient_open(u.unit)) gradient_bytes += booked(2 * u.padded);
      }
      const std::string at = (backward ? "backward of layer " : "forward of layer ") + std::to_string(layer);
      EXPECT_EQ(gathered, expected_gathered(strategy, blocks, layer, backward)) << at;
      EXPECT_EQ(ledger.current(MemoryCategory::chunk_buffers, MemorySpace::device), gathered_bytes) << at;
      // A started reduction keeps its buffer until it is finished: the block's, under the embeddings' backward.
      int64_t in_flight = 0;
      if (backward && layer == planner::kEmbeddingLayer && ranks > 1) in_flight = booked(2 * layout.units[1].padded);
      EXPECT_EQ(ledger.current(MemoryCategory::comm_buffers, MemorySpace::device), gradient_bytes + in_flight) << at;
      EXPECT_EQ(units.schedule().gradient_open(kRootUnit), backward) << at;
      // full_shard: the prefetched block's all-gather runs while this layer does.
      const bool block = layer != planner::kEmbeddingLayer && layer != blocks;
      const int prefetched = backward ? layer - 1 : layer + 1;
      const bool prefetching = ranks > 1 && block && strategy == FsdpStrategy::full_shard && prefetched >= 0 && prefetched < blocks;
      EXPECT_EQ(ops.in_flight(), (prefetching ? 1u : 0u) + (in_flight > 0 ? 1u : 0u)) << at;
    };
    const auto check_bound = [&](int layer, bool backward) { testing::check_layer_bound(uses, order, parameter_of, gradient_of, layer, backward, rank); };
    const int L = static_cast<int>(model.config.num_layers);
    for (int micro = 0; micro < micro_batches; ++micro) {
      for (int layer = planner::kEmbeddingLayer; layer <= L; ++layer) {
        EXPECT_TRUE(units.before_forward(layer).ok());
        check_live(layer, false);
        check_bound(layer, false);
        EXPECT_TRUE(units.after_forward(layer).ok());
      }
      for (int layer = L; layer >= planner::kEmbeddingLayer; --layer) {
        EXPECT_TRUE(units.before_backward(layer).ok());
        check_live(layer, true);
        check_bound(layer, true);
        EXPECT_TRUE(units.after_backward(layer).ok());
      }
    }
    EXPECT_TRUE(units.finish_reductions().ok());
    EXPECT_EQ(units.calls_in_flight(), 0u);
    EXPECT_EQ(ops.in_flight(), 0u);
    EXPECT_EQ(ops.reductions, ranks > 1 ? micro_batches * (blocks + 1) : 0) << "one reduce-scatter per unit and micro-batch";
    // Every unit gathered for its forward; under full_shard the blocks again for their backward.
    const int gathers = micro_batches * (blocks + 1 + (strategy == FsdpStrategy::full_shard ? blocks : 0));
    EXPECT_EQ(ops.gathers, ranks > 1 ? gathers : 0) << "all-gathers";
    // Offloaded: each gather's fp32 shard up, each unit's reduced fp32 gradient shard down.
    const int64_t regathered = strategy == FsdpStrategy::full_shard ? layout.shard_numel - layout.units[0].shard : 0;
    EXPECT_EQ(ops.bytes_up, offload ? 4 * micro_batches * (layout.shard_numel + regathered) : 0) << "copies up";
    EXPECT_EQ(ops.bytes_down, offload ? 4 * micro_batches * layout.shard_numel : 0) << "copies down";
    EXPECT_EQ(ledger.current(MemoryCategory::chunk_buffers, MemorySpace::device), 0) << "nothing gathered after the step";
    EXPECT_EQ(ledger.current(MemoryCategory::comm_buffers, MemorySpace::device), 0) << "no gradient buffer after the step";

    // The gradient shard: each element the sum of every rank's, every micro-batch's and every use's contributions; the padding 0.
    const float per_use = static_cast<float>(ranks * (ranks + 1) / 2);
    std::vector<float> want(static_cast<size_t>(layout.shard_numel), 0.0f);
    std::vector<float> contribution(flat.size());
    for (size_t p = 0; p < order.size(); ++p) {
      std::fill_n(contribution.begin() + order[p].offset, order[p].numel, per_use * static_cast<float>(micro_batches * times_used[p]));
    }
    flat_values_to_shard(pieces, order, contribution.data(), want.data());
    int64_t wrong = 0;
    for (int64_t i = 0; i < layout.shard_numel; ++i) wrong += units.gradients()[i] != want[static_cast<size_t>(i)] ? 1 : 0;
    EXPECT_EQ(wrong, 0) << "gradient shard on rank " << rank;
    for (size_t c = 0; c < std::size(result.peaks); ++c) result.peaks[c] = ledger.peak(static_cast<MemoryCategory>(c), MemorySpace::device);
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), device.reserved_bytes()) << "every byte given back to the cache";
  return result;
}

TEST(FsdpDeviceUnits, AStepOnEveryRankMatchesTheScheduleTheModelAndThePlanner) {
  for (const auto& [name, model] : {std::pair{"gpt2", tiny_gpt2()}, std::pair{"qwen2", tiny_qwen2()}}) {
    for (const FsdpStrategy strategy : {FsdpStrategy::full_shard, FsdpStrategy::shard_grad_op}) {
      for (const bool offload : {false, true}) {
        planner::PluginOptions plugin;
        plugin.kind = planner::PluginKind::torch_fsdp;
        plugin.fsdp_strategy = strategy;
        plugin.cpu_offload = offload;
        ASSERT_TRUE(check_gpu_plugin(plugin).ok());
        const int micro_batches = offload ? 1 : kMicroBatches;  // FSDP accumulates nothing offloaded
        for (const int ranks : offload ? std::vector<int>{2, 3} : std::vector<int>{1, 2, 3}) {
          const std::string what = std::string(name) + ", " + (strategy == FsdpStrategy::full_shard ? "full_shard" : "shard_grad_op") + ", " +
                                   std::to_string(ranks) + " ranks" + (offload ? ", offloaded" : "");
          Peers peers(ranks);
          std::vector<RankResult> results(static_cast<size_t>(ranks));
          std::vector<std::thread> threads;
          for (int r = 0; r < ranks; ++r) {
            threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = run_rank(model, strategy, peers, r, ranks, micro_batches, offload); });
          }
          for (std::thread& t : threads) t.join();
          const planner::RankMemory row = planner_row(model, plugin, ranks, micro_batches);
          // The blocks behind each category: 1 shard each (offloaded: one unit's on its way), 2 states (offloaded: none);
          // the root and two blocks gathered (or every unit); the root's and one block's gradient.
          const int64_t units = static_cast<int64_t>(planner::fsdp_layout(model.inventory, planner::flat_parameter_order(model.inventory), ranks).units.size());
          const std::pair<MemoryCategory, int64_t> blocks[] = {{MemoryCategory::parameters, 1},
                                                               {MemoryCategory::gradients, 1},
                                                               {MemoryCategory::optimizer_states, offload ? 0 : 2},
                                                               {MemoryCategory::master_weights, 0},
                                                               {MemoryCategory::chunk_buffers, strategy == FsdpStrategy::full_shard ? 3 : units},
                                                               {MemoryCategory::comm_buffers, 2}};
          for (const RankResult& r : results) {
            for (const auto& [category, count] : blocks) {
              const int64_t planned = row.bytes[category].device, peak = r.peaks[static_cast<size_t>(category)];
              EXPECT_GE(peak, planned) << what << ": " << to_string(category);
              EXPECT_LT(peak, planned + kAlign * count + (count == 0 ? 1 : 0)) << what << ": " << to_string(category) << " against the planner's " << planned;
            }
          }
        }
      }
    }
  }
}

// A one-rank FSDP shard holds every parameter, the root's first (not the
// flat order): what a one-GPU FSDP checkpoint writes goes to flat order and
// back through shard_values.h, and 2 ranks' shards together cover every element once.
TEST(FsdpDeviceUnits, AShardGoesToFlatOrderAndBack) {
  const planner::Model model = tiny_gpt2();
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::torch_fsdp;
  std::vector<float> flat(static_cast<size_t>(model.parameter_count));
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
  const planner::OptimizerLayout one = planner::optimizer_layout(model, plugin, 1, 0);
  ASSERT_EQ(one.shard_numel, model.parameter_count);
  std::vector<float> shard(static_cast<size_t>(one.shard_numel), -1.0f), back(flat.size(), -1.0f);
  flat_values_to_shard(one.pieces, order, flat.data(), shard.data());
  EXPECT_NE(shard, flat) << "the root's parameters first";
  shard_values_to_flat(one.pieces, order, shard.data(), back.data());
  EXPECT_EQ(back, flat);
  std::vector<float> covered(flat.size(), 0.0f);
  for (int rank = 0; rank < 2; ++rank) {
    const planner::OptimizerLayout half = planner::optimizer_layout(model, plugin, 2, rank);
    std::vector<float> ones(static_cast<size_t>(half.shard_numel), 1.0f), part(flat.size(), 0.0f);
    shard_values_to_flat(half.pieces, order, ones.data(), part.data());
    for (size_t i = 0; i < flat.size(); ++i) covered[i] += part[i];
  }
  EXPECT_EQ(std::count(covered.begin(), covered.end(), 1.0f), model.parameter_count);
}

}  // namespace
}  // namespace tessera::engine
