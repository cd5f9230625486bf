// Gemini's chunks in the GPU step's memory (device/gemini_device_chunks.h),
// on the CPU: "device" memory is heap memory carved by the caching
// allocator, pinned memory the pinned allocator's over the heap, and the
// ranks are threads whose collectives exchange through shared pointers
// (EmulatedCopies), so one step of 2 micro-batches runs on 1, 2 and 3 ranks
// with every chunk's shards on the device (`cuda`) or on the host (`cpu`),
// and under `static` placements that split the chunks between the sides
// (the states of some chunks on the host; all of them there with the shards
// on the device; and with the shards of the outgrown chunks on the host),
// and `auto` as the planner solves it on a device too small for every shard,
// on a tiny GPT-2 of awkward sizes (vocabulary 67, width 12, a tied head) in
// chunks of 1536 elements and in chunks of 498 that its embedding and MLP weights outgrow.
// Checked, on every rank:
//  - before each layer runs, forward and backward, every parameter it uses
//    is bound into a gathered chunk holding the model's weights;
//  - after the step, this rank's gradient shard holds each parameter's
//    contributions summed over ranks, micro-batches and uses (the tied
//    embedding's two), the padding zero, and the weight shard is unchanged;
//  - only host chunks cross PCIe: one upload per gather and per gradient
//    chunk opened, one download per reduce; and a device chunk whose states
//    are on the host, its reduced gradient shard down into its host copy
//    once a step and the weights the host writes there up into its shard;
//    the bytes each way the planner's (GeminiStepReplay::host_up_bytes, host_down_bytes);
//  - the ledger after every move is the planner's estimate of the same run
//    (planner/memory_model.h) per category: parameters and gradients on the
//    device and on the host (both rounded to the pinned allocator's powers
//    of two: planner/pinned_host_blocks.h), the host copies of the exchanging chunks under gradients, the
//    host's master weights and states the leading chunks' slots, and chunk_buffers at their largest the planner's replayed peak,
//    exactly where the blocks are multiples of the caching allocator's 512
//    bytes (each rounds up to them), within 512 bytes a block otherwise; the ledger's own peak of
//    chunk_buffers at most one shard above it (the gather's moment when both
//    the shard and the whole chunk exist).
#include "tessera/engine/device/gemini_device_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <map>
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

using testing::FakeEvents;
using testing::HeapMemory;
using testing::Peers;
using testing::weight_at;

constexpr StreamId kCopyStream = 0x77;
constexpr int kMicroBatches = 2;

// The device operations on host memory, the collectives between the ranks' threads.
class EmulatedCopies final : public ChunkCopies {
 public:
  EmulatedCopies(Peers& peers, int rank, FakeEvents& events) : peers_(peers), rank_(rank), events_(events) {}
  Status copy(bf16* to, const bf16* from, int64_t n) override {
    std::copy_n(from, n, to);
    return Status::success();
  }
  Status zero(bf16* device, int64_t n) override {
    std::fill_n(device, n, bf16{});
    return Status::success();
  }
  Status upload(bf16* device, const bf16* pinned, int64_t n) override {
    ++uploads;
    uploaded += n;
    return copy(device, pinned, n);
  }
  Status download(bf16* pinned, const bf16* device, int64_t n) override {
    ++downloads;
    downloaded += n;
    return copy(pinned, device, n);
  }
  Status wait_for_copies() override {
    events_.run(kCopyStream);
    return Status::success();
  }
  StreamId copy_stream() const override { return kCopyStream; }
  Status all_gather(bf16* chunk, int64_t shard) override {
    peers_.all_gather(rank_, chunk, shard);
    return Status::success();
  }
  Status reduce_scatter(const bf16* chunk, bf16* shard, int64_t n) override {
    peers_.reduce_scatter(rank_, chunk, shard, n);
    return Status::success();
  }
  int uploads = 0, downloads = 0;
  int64_t uploaded = 0, downloaded = 0;  // elements

 private:
  Peers& peers_;
  int rank_;
  FakeEvents& events_;
};

planner::Model tiny() {
  const planner::ModelConfig c =
      planner::parse_model_config(R"({"model_type":"gpt2","vocab_size":67,"n_embd":12,"n_layer":3,"n_head":2,"n_positions":9})", "tiny").value();
  return planner::make_model(c);
}

// The placements the GPU step runs (device/gpu_plugins.h): every chunk on
// the device, kept gathered or not, or every chunk on the host, and the
// static ones that split them: offload_optim_frac 0.05 sends the states of
// the first chunks (2 of 5 in chunks of 1536; ColossalAI's total counts a
// chunk once per tensor), 1 all of them; `outgrown_on_host`: an
// offload_param_frac whose budget (gemini_static_placement.h) sends the
// shards of the chunks larger than the chunk size to the host. `auto`: as
// the planner solves it on a device small enough that some leading chunks'
// shards go to the host (planned_run).
struct Placement {
  const char* name;
  planner::GeminiPlacement policy;
  double shard_param_frac = 1, offload_optim_frac = 0, offload_param_frac = 0;
  bool outgrown_on_host = false;
};
const Placement kPlacements[] = {{"cuda", planner::GeminiPlacement::cuda},
                                 {"cpu", planner::GeminiPlacement::cpu},
                                 {"static kept gathered", planner::GeminiPlacement::static_placement, 0.5},
                                 {"static all on the host", planner::GeminiPlacement::static_placement, 1, 1, 1},
                                 {"static some states on the host", planner::GeminiPlacement::static_placement, 1, 0.05},
                                 {"static states on the host, shards on the device", planner::GeminiPlacement::static_placement, 1, 1},
                                 {"static outgrown chunks on the host", planner::GeminiPlacement::static_placement, 1, 1, 0, true},
                                 {"auto", planner::GeminiPlacement::auto_placement}};

planner::GeminiOptions gemini(const Placement& placement, int64_t chunk_size, int ranks = 1) {
  planner::GeminiOptions g;
  g.placement_policy = placement.policy;
  g.chunk_size = chunk_size;
  g.shard_param_frac = placement.shard_param_frac;
  g.offload_optim_frac = placement.offload_optim_frac;
  g.offload_param_frac = placement.offload_param_frac;
  if (placement.outgrown_on_host) {
    // A chunk goes to the host when its capacity passes (1 - offload_param_frac) × the total counting it once per tensor.
    const planner::Model model = tiny();
    const planner::ChunkLayout layout = planner::pack_chunks(model.inventory, chunk_size, ranks);
    double counted = 0;
    for (const int chunk : layout.tensor_chunk) counted += chunk >= 0 ? static_cast<double>(layout.chunk_capacity[static_cast<size_t>(chunk)]) : 0;
    g.offload_param_frac = 1 - (static_cast<double>(chunk_size) + 0.5) / counted;  // half an element above: rounding keeps chunk_size's own below it
  }
  return g;
}

planner::PluginOptions gemini_plugin(const planner::GeminiOptions& options) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::gemini;
  plugin.gemini = options;
  return plugin;
}

// Per layer slot (layer + 1), the flat parameters its tensors use (a tied head uses the embedding's).
std::vector<std::vector<int>> parameters_of_layers(const planner::Model& model) {
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  std::map<int, int> flat_of_tensor;
  for (size_t p = 0; p < order.size(); ++p) flat_of_tensor[order[p].tensor_index] = static_cast<int>(p);
  std::vector<std::vector<int>> out(static_cast<size_t>(model.config.num_layers) + 2);
  for (size_t i = 0; i < model.inventory.tensors.size(); ++i) {
    const planner::TensorInfo& t = model.inventory.tensors[i];
    out[static_cast<size_t>(t.layer + 1)].push_back(flat_of_tensor.at(t.tied_to >= 0 ? t.tied_to : static_cast<int>(i)));
  }
  return out;
}

struct RankResult {
  int64_t parameters_device = 0, parameters_host = 0, gradients_device = 0, gradients_host = 0;
  int64_t steady_chunk_buffers_peak = 0, chunk_buffers_peak = 0;
  int64_t expected_parameters_host = 0;  // the host shards rounded to powers of two
  int64_t expected_gradients_host = 0;   // and the exchanging chunks' host copies
  int64_t uploaded = 0, downloaded = 0;  // elements over PCIe in the step
};

// One step of kMicroBatches on `rank`: forward from the embedding to the
// head, backward back, every rank adding rank + 1 into each gradient element
// of each parameter a layer uses. Failures are EXPECTs: a rank that stopped
// would leave the others waiting in a collective.
RankResult run_rank(const planner::Model& model, const GeminiChunkPlan& plan, Peers& peers, int rank, int ranks) {
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  const std::vector<std::vector<int>> uses = parameters_of_layers(model);
  HeapMemory device_memory, host_memory;
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator device(device_memory, events, ledger);
  PinnedHostAllocator host(host_memory, events, ledger);
  EmulatedCopies copies(peers, rank, events);
  std::vector<bf16*> parameter_of(order.size()), gradient_of(order.size());
  RankResult result;
  std::vector<int> times_used(order.size(), 0);  // per backward
  for (const auto& layer : uses) {
    for (const int p : layer) ++times_used[static_cast<size_t>(p)];
  }
  {
    GeminiDeviceChunks chunks(plan, rank, ranks, device, host, ledger, copies, parameter_of, gradient_of);
    // This rank's weight shards: the model's weights at their places in the chunk, the padding 0.
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const GeminiChunk& p = plan.chunks[c];
      for (size_t j = 0; j < p.parameters.size(); ++j) {
        const planner::FlatParameter& f = order[static_cast<size_t>(p.parameters[j])];
        for (int64_t k = 0; k < f.numel; ++k) {
          const int64_t at = p.offsets[j] + k - rank * p.shard;
          if (at >= 0 && at < p.shard) chunks.weight_shard(c)[at] = narrow<bf16>(weight_at(f.offset + k));
        }
      }
    }
    EXPECT_TRUE(chunks.zero_gradients().ok());
    const auto steady = [&] {
      result.steady_chunk_buffers_peak = std::max(result.steady_chunk_buffers_peak, ledger.current(MemoryCategory::chunk_buffers, MemorySpace::device));
    };
    const auto check_bound = [&](int layer, bool backward) { testing::check_layer_bound(uses, order, parameter_of, gradient_of, layer, backward, rank); };
    const int L = static_cast<int>(model.config.num_layers);
    for (int micro = 0; micro < kMicroBatches; ++micro) {
      for (int layer = planner::kEmbeddingLayer; layer <= L; ++layer) {
        EXPECT_TRUE(chunks.use_layer(layer, false).ok());
        steady();
        check_bound(layer, false);
      }
      for (int layer = L; layer >= planner::kEmbeddingLayer; --layer) {
        EXPECT_TRUE(chunks.use_layer(layer, true).ok());
        steady();
        check_bound(layer, true);
      }
    }
    EXPECT_TRUE(chunks.release_all().ok());
    EXPECT_TRUE(copies.wait_for_copies().ok());
    EXPECT_EQ(ledger.current(MemoryCategory::chunk_buffers, MemorySpace::device), 0) << "nothing gathered after the step";

    // The shards: each gradient element the sum of every rank's, every micro-batch's and every use's contributions.
    const float per_use = static_cast<float>(ranks * (ranks + 1) / 2);
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const GeminiChunk& p = plan.chunks[c];
      std::vector<float> gradient(static_cast<size_t>(p.shard), 0.0f), weight(static_cast<size_t>(p.shard), 0.0f);
      for (size_t j = 0; j < p.parameters.size(); ++j) {
        const planner::FlatParameter& f = order[static_cast<size_t>(p.parameters[j])];
        for (int64_t k = 0; k < f.numel; ++k) {
          const int64_t at = p.offsets[j] + k - rank * p.shard;
          if (at < 0 || at >= p.shard) continue;
          gradient[static_cast<size_t>(at)] = per_use * static_cast<float>(kMicroBatches * times_used[static_cast<size_t>(p.parameters[j])]);
          weight[static_cast<size_t>(at)] = weight_at(f.offset + k);
        }
      }
      int64_t wrong_gradients = 0, wrong_weights = 0;
      for (int64_t i = 0; i < p.shard; ++i) {
        wrong_gradients += widen(chunks.gradient_shard(c)[i]) != gradient[static_cast<size_t>(i)] ? 1 : 0;
        wrong_weights += widen(chunks.weight_shard(c)[i]) != weight[static_cast<size_t>(i)] ? 1 : 0;
      }
      EXPECT_EQ(wrong_gradients, 0) << "gradient shard of chunk " << c << " on rank " << rank;
      EXPECT_EQ(wrong_weights, 0) << "weight shard of chunk " << c << " on rank " << rank;
      const auto pinned = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(p.shard * 2)));
      if (p.on_host) result.expected_parameters_host += pinned;
      if (p.on_host || p.exchanges_through_host()) result.expected_gradients_host += pinned;
      // An exchanging chunk's reduced gradient shard came down into its host copy.
      if (p.exchanges_through_host()) {
        const bf16* copy = chunks.host_gradients(c);
        int64_t wrong = 0;
        for (int64_t i = 0; i < p.shard; ++i) wrong += widen(copy[i]) != widen(chunks.gradient_shard(c)[i]) ? 1 : 0;
        EXPECT_EQ(wrong, 0) << "host copy of chunk " << c;
      }
    }
    // The host optimizer's 16-bit weights: into the host copies, up into the device shards.
    int64_t exchanged = 0, exchanging = 0;
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const GeminiChunk& p = plan.chunks[c];
      if (!p.exchanges_through_host()) continue;
      ++exchanging;
      exchanged += p.shard;
      for (int64_t i = 0; i < p.shard; ++i) chunks.host_weights(c)[i] = narrow<bf16>(static_cast<float>(i % 7 + 1));
    }
    const int host_gathers = copies.uploads, host_reduces = copies.downloads - static_cast<int>(exchanging);
    EXPECT_TRUE(chunks.weights_up().ok());
    EXPECT_TRUE(copies.wait_for_copies().ok());
    for (size_t c = 0; c < plan.chunks.size(); ++c) {
      const GeminiChunk& p = plan.chunks[c];
      int64_t wrong = 0;
      for (int64_t i = 0; p.exchanges_through_host() && i < p.shard; ++i) wrong += widen(chunks.weight_shard(c)[i]) != static_cast<float>(i % 7 + 1) ? 1 : 0;
      EXPECT_EQ(wrong, 0) << "weights up into the device shard of chunk " << c;
    }
    EXPECT_EQ(copies.uploads + copies.downloads, chunks.host_moves()) << "every move counted";
    result.uploaded = copies.uploaded;
    result.downloaded = copies.downloaded;
    if (std::any_of(plan.chunks.begin(), plan.chunks.end(), [](const GeminiChunk& p) { return p.on_host; })) {
      EXPECT_GT(host_gathers, 0);
      EXPECT_GT(host_reduces, 0);
    } else {
      // Only the exchanging chunks cross PCIe: each shard once down and once up a step.
      EXPECT_EQ(copies.downloads, exchanging);
      EXPECT_EQ(copies.uploads, exchanging);
      EXPECT_EQ(copies.downloaded, exchanged);
      EXPECT_EQ(copies.uploaded, exchanged);
    }
    result.parameters_device = ledger.peak(MemoryCategory::parameters, MemorySpace::device);
    result.parameters_host = ledger.peak(MemoryCategory::parameters, MemorySpace::host);
    result.gradients_device = ledger.peak(MemoryCategory::gradients, MemorySpace::device);
    result.gradients_host = ledger.peak(MemoryCategory::gradients, MemorySpace::host);
    result.chunk_buffers_peak = ledger.peak(MemoryCategory::chunk_buffers, MemorySpace::device);
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), device.reserved_bytes()) << "every byte given back to the cache";
  return result;
}

std::vector<RankResult> run_ranks(const planner::Model& model, const GeminiChunkPlan& plan, int ranks) {
  Peers peers(ranks);
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] { results[static_cast<size_t>(r)] = run_rank(model, plan, peers, r, ranks); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

planner::MemoryEstimate planner_estimate(const planner::Model& model, const planner::GeminiOptions& options, int ranks, int64_t device_bytes = 0) {
  return testing::planner_estimate(model, gemini_plugin(options), ranks, kMicroBatches, device_bytes);
}

// What the engine runs and the planner's row of the same run: the placement,
// or under `auto` the static placement the planner solved, as the CLI's
// resolve_auto_placement hands it to either engine (every state on the
// host, the solved leading chunks' shards there), on a device whose share
// (auto_placement_cuda_fraction) is a byte short of the device's bytes with
// no chunk's shards on the host.
struct PlannedRun {
  planner::GeminiOptions options;
  GeminiChunkPlan plan;
  planner::RankMemory row;
  planner::GeminiStepReplay step;  // the planner's step: its PCIe bytes among the rest
};
PlannedRun planned_run(const planner::Model& model, const Placement& placement, int64_t chunk_size, int ranks) {
  planner::GeminiOptions options = gemini(placement, chunk_size, ranks);
  if (placement.policy != planner::GeminiPlacement::auto_placement) {
    const planner::MemoryEstimate estimate = planner_estimate(model, options, ranks);
    return {options, gemini_chunk_plan(model, options, ranks), estimate.ranks.at(0), estimate.gemini->step};
  }
  planner::GeminiOptions solved = options;
  solved.placement_policy = planner::GeminiPlacement::static_placement;
  solved.offload_optim_frac = 1;
  solved.offload_param_frac = 1;
  const int64_t all_on_host = planner_estimate(model, solved, ranks).ranks.at(0).device_total;
  solved.offload_param_frac = 0;
  const int64_t none_on_host = planner_estimate(model, solved, ranks).ranks.at(0).device_total;
  const double share = planner::EstimateRequest{}.assumptions.auto_placement_cuda_fraction;
  const auto device = static_cast<int64_t>(static_cast<double>(none_on_host - 1) / share);
  EXPECT_LT(all_on_host, none_on_host);
  const planner::MemoryEstimate estimate = planner_estimate(model, options, ranks, device);
  const std::vector<bool>& on_host = estimate.gemini->parameters_on_host;
  const int64_t host_chunks = std::count(on_host.begin(), on_host.end(), true);
  return {options, gemini_chunk_plan(model, solved, ranks, host_chunks), estimate.ranks.at(0), estimate.gemini->step};
}

TEST(GeminiDeviceChunks, AStepOnEveryRankMatchesTheModelAndThePlanner) {
  const planner::Model model = tiny();
  for (const int ranks : {1, 2, 3}) {
    for (const Placement& placement : kPlacements) {
      for (const int64_t chunk_size : {int64_t{1536}, int64_t{498}}) {
        if (placement.outgrown_on_host && chunk_size != 498) continue;  // no chunk outgrows 1536
        const PlannedRun run = planned_run(model, placement, chunk_size, ranks);
        const GeminiChunkPlan& plan = run.plan;
        const std::string what = std::string(placement.name) + ", " + std::to_string(ranks) + " ranks, chunks of " + std::to_string(chunk_size);
        ASSERT_TRUE(check_gpu_plugin(gemini_plugin(run.options)).ok()) << what;
        const auto count = [&](auto&& which) { return std::count_if(plan.chunks.begin(), plan.chunks.end(), which); };
        const auto n = static_cast<int64_t>(plan.chunks.size());
        const int64_t shards_on_host = count([](const GeminiChunk& c) { return c.on_host; });
        const int64_t states_on_host = count([](const GeminiChunk& c) { return c.optimizer_on_host; });
        // The placement as named: the split ones split.
        if (placement.offload_optim_frac > 0 && placement.offload_optim_frac < 1) {
          EXPECT_TRUE(states_on_host > 0 && states_on_host < n && shards_on_host == 0) << what;
        }
        if (placement.outgrown_on_host || placement.policy == planner::GeminiPlacement::auto_placement) {
          EXPECT_TRUE(shards_on_host > 0 && shards_on_host < n && states_on_host == n) << what;
        }
        for (const GeminiChunk& c : plan.chunks) ASSERT_TRUE(!c.on_host || c.optimizer_on_host) << what << ": shards on the host only with the states";
        // The leading chunks' states on the host (src/cuda/gemini_shards.h books their slots there).
        const int64_t host_states = plan.host_optimizer_elements();
        ASSERT_EQ(host_states, states_on_host == n ? plan.shard_numel() : plan.chunks[static_cast<size_t>(states_on_host)].shard_offset) << what;
        const std::vector<RankResult> results = run_ranks(model, plan, ranks);
        const auto& planned = run.row.bytes;
        // A block of the caching allocator is its request rounded up to 512 bytes.
        const bool aligned = chunk_size == 1536;
        const int64_t blocks = 2 * static_cast<int64_t>(plan.chunks.size());
        const int64_t slack = aligned ? 0 : 512 * blocks;
        int64_t largest_shard_bytes = 0;
        for (const GeminiChunk& c : plan.chunks) largest_shard_bytes = std::max(largest_shard_bytes, 2 * c.shard);
        for (const RankResult& r : results) {
          const int64_t p_device = planned[MemoryCategory::parameters].device, g_device = planned[MemoryCategory::gradients].device;
          EXPECT_GE(r.parameters_device, p_device) << what;
          EXPECT_LE(r.parameters_device, p_device + slack) << what;
          EXPECT_GE(r.gradients_device, g_device) << what;
          EXPECT_LE(r.gradients_device, g_device + slack) << what;
          EXPECT_EQ(2 * r.uploaded, run.step.host_up_bytes) << what << ": the planner's PCIe bytes up";
          EXPECT_EQ(2 * r.downloaded, run.step.host_down_bytes) << what << ": and down";
          // The pinned blocks, each a power of two: the ledger's and the planner's.
          EXPECT_EQ(r.parameters_host, r.expected_parameters_host) << what;
          EXPECT_EQ(r.gradients_host, r.expected_gradients_host) << what;
          EXPECT_EQ(planned[MemoryCategory::parameters].host, r.parameters_host) << what;
          EXPECT_EQ(planned[MemoryCategory::gradients].host, r.gradients_host) << what;
          EXPECT_EQ(planned[MemoryCategory::master_weights].host, 4 * host_states) << what;
          EXPECT_EQ(planned[MemoryCategory::master_weights].device, 4 * (plan.shard_numel() - host_states)) << what;
          EXPECT_EQ(planned[MemoryCategory::optimizer_states].host, 8 * host_states) << what;
          EXPECT_EQ(planned[MemoryCategory::optimizer_states].device, 8 * (plan.shard_numel() - host_states)) << what;
          const int64_t buffers = planned[MemoryCategory::chunk_buffers].device;
          EXPECT_LE(std::abs(r.steady_chunk_buffers_peak - buffers), slack) << what;
          EXPECT_LE(r.chunk_buffers_peak, r.steady_chunk_buffers_peak + largest_shard_bytes + (aligned ? 0 : 512)) << what;
        }
      }
    }
  }
}

// Every placement runs: static's at any fractions, `auto` as the planner solves it.
TEST(GeminiDeviceChunks, TheGpuStepRunsEveryPlacement) {
  planner::GeminiOptions options = gemini(kPlacements[4], 1536);
  for (const double frac : {0.0, 0.05, 0.5, 1.0}) {
    options.offload_optim_frac = frac;
    options.offload_param_frac = frac;
    EXPECT_TRUE(check_gpu_plugin(gemini_plugin(options)).ok()) << frac;
  }
  options.placement_policy = planner::GeminiPlacement::auto_placement;
  EXPECT_TRUE(check_gpu_plugin(gemini_plugin(options)).ok());
}

// A one-rank Gemini shard holds every parameter at its chunk's offsets: to
// the whole model's flat order and back, on awkward chunks (some outgrown).
TEST(GeminiDeviceChunks, AOneRankShardGoesToFlatOrderAndBack) {
  const planner::Model model = tiny();
  const std::vector<planner::FlatParameter> order = planner::flat_parameter_order(model.inventory);
  for (const int64_t chunk_size : {int64_t{498}, int64_t{1536}}) {
    const planner::OptimizerLayout layout = planner::optimizer_layout(model, gemini_plugin(gemini(kPlacements[0], chunk_size)), 1, 0);
    ASSERT_GT(layout.shard_numel, model.parameter_count) << "the chunks' padding";
    std::vector<float> flat(static_cast<size_t>(model.parameter_count)), shard(static_cast<size_t>(layout.shard_numel), -1.0f), back(flat.size(), 0.0f);
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i);
    flat_values_to_shard(layout.pieces, order, flat.data(), shard.data());
    shard_values_to_flat(layout.pieces, order, shard.data(), back.data());
    EXPECT_EQ(back, flat) << "chunks of " << chunk_size;
    const auto untouched = std::count(shard.begin(), shard.end(), -1.0f);
    EXPECT_EQ(untouched, layout.shard_numel - model.parameter_count) << "only the padding is left as it was";
  }
}

}  // namespace
}  // namespace tessera::engine
