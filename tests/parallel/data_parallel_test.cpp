// Data parallelism against one process, under mpirun (-np 2 and 4): for each
// plugin the engine runs (DDP, ZeRO-1 and 2 with and without CPU offload, FSDP
// both strategies, Gemini on the device and on the host), 5 steps on N ranks leave the same parameters as 5
// steps of one rank on the same global batch (the rank's micro-batches · N),
// and the bytes each collective moved equal the formula.
//
// Tolerance: the ranks' gradients are summed in another order than one rank
// accumulates its micro-batches, so they differ by rounding. Over the whole
// model the difference stays below 1e-5 of the parameters' norm (measured
// 1.2e-7 at 4 ranks). It is not held per tensor: the attention's key bias has a
// gradient of zero up to rounding (softmax is invariant to it), and Adam
// normalises that noise into updates of about lr.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <string>
#include <vector>

#include "tessera/engine/comm/mpi.h"
#include "tessera/engine/parallel/gemini_chunks.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/engine/trainer.h"
#include "training_check.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/gemini_gathering.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"

namespace {

using namespace tessera;
using namespace tessera::engine;
using training_check::expect;
using training_check::read_model;
using training_check::relative_difference;
using training_check::train_into;

// bf16 keeps 8 significant bits: the ranks' 16-bit gradients are rounded at
// other points than one rank's (one rank rounds after each of its N·k
// micro-batches, N ranks after each of k, then once after the sum), and Adam
// turns a relative error of the gradient into the same relative error of
// each update. Bound: bf16's machine epsilon, 2^-8, over the whole model
// (measured 1.0e-3 at 4 ranks).
constexpr double kBf16Tolerance = 1.0 / 256;

TrainOptions options(const planner::PluginOptions& plugin, int64_t micro_batches, planner::Precision precision) {
  return training_check::short_run(plugin, micro_batches, precision);
}

}  // namespace

// DDP starts its buckets' all-reduces inside the step's last backward, and
// ZeRO-1 with several pieces its pieces' reduce-scatters (zero_overlap.h):
// by the end of backward every bucket or piece is started (or done), none
// waits for reduce_gradients(); an earlier micro-batch's backward (no_sync)
// starts none.
void check_reductions_start_in_backward(comm::Communicator& world, const planner::Model& model, const std::string& label,
                                        const planner::PluginOptions& plugin, comm::Collective collective, int64_t expected) {
  auto strategy = make_parallel_strategy<float>(world, plugin, model);
  MemoryLedger ledger;
  auto created = Transformer<float>::create(model, ledger, 1, 16, 7, planner::RecomputeMode::none, strategy->storage());
  if (!created.ok()) return expect(false, label + ": " + created.error().message, world.rank());
  Transformer<float>& net = created.value();
  std::vector<bool> decay(net.parameters().size(), false);
  if (Status s = strategy->attach(ledger, net, decay, OptimizerOptions{}); !s) return expect(false, label + ": " + s.error().message, world.rank());
  std::vector<int32_t> tokens(16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + static_cast<size_t>(world.rank())) % 50);
  const auto launched = [&] { return world.counters().calls_of(collective) + static_cast<int64_t>(world.started_calls()); };
  const int64_t before = launched();
  strategy->zero_gradients();
  for (bool last : {false, true}) {
    net.forward(tokens.data(), tokens.data());
    strategy->prepare_backward(last);
    net.backward(0.5f);
    expect(launched() - before == (last ? expected : 0), label + ": " + (last ? "the last" : "an earlier") + " backward started " +
                                                             std::to_string(launched() - before) + " of " + std::to_string(expected),
           world.rank());
  }
  expect(strategy->reduce_gradients().ok() && world.started_calls() == 0, label + ": reduce_gradients finishes the started reductions", world.rank());
}

void check_overlaps(comm::Communicator& world, const planner::Model& model) {
  planner::PluginOptions ddp;
  ddp.kind = planner::PluginKind::torch_ddp;
  ddp.bucket_bytes = 256 << 10;
  const int64_t bucket_elements = ddp.bucket_bytes / 4;
  check_reductions_start_in_backward(world, model, "ddp overlap", ddp, comm::Collective::all_reduce,
                                     (model.parameter_count + bucket_elements - 1) / bucket_elements);
  planner::PluginOptions zero1;
  zero1.kind = planner::PluginKind::low_level_zero;
  zero1.zero_stage = 1;
  zero1.reduce_bucket_numel = 40000;
  const int64_t shard = planner::shard_numel(model.parameter_count, world.size());
  const int64_t pieces = static_cast<int64_t>(zero1_pieces(shard, planner::zero_bucket_numel(40000, model.parameter_count, world.size()), world.size()).size());
  expect(pieces > 2, "zero1 overlap: several pieces", world.rank());
  check_reductions_start_in_backward(world, model, "zero1 overlap", zero1, comm::Collective::reduce_scatter, pieces);
}

int main() {
  auto runtime = comm::MpiRuntime::start().value();
  auto world = runtime->world().value();
  const int rank = world->rank(), ranks = world->size();
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  const int64_t params = model.parameter_count, k = 2;
  const std::string root = training_check::run_root(*world, "data-parallel");

  check_overlaps(*world, model);
  const planner::FsdpLayout units = planner::fsdp_layout(model.inventory, planner::flat_parameter_order(model.inventory), ranks);
  struct Case {
    const char* name;
    planner::PluginKind kind;
    int zero_stage;
    planner::FsdpStrategy fsdp;
    planner::Precision precision = planner::Precision::fp32;
    bool cpu_offload = false;
    planner::GeminiPlacement placement = planner::GeminiPlacement::cuda;
    int64_t chunk_size = 1 << 17;  // gemini: several chunks, some spanning two layers; a multiple of 2 and 4
    double offload_optim_frac = 0;  // gemini static
    double shard_param_frac = 1;    // gemini static
    double offload_param_frac = 0;  // gemini static
    int64_t zero2_bucket = 0;       // ZeRO-2's reduce bucket when smaller than the model (0: the whole model)
  };
  const planner::Precision bf16 = planner::Precision::bf16;
  for (const Case& c : {Case{"torch_ddp", planner::PluginKind::torch_ddp, 0, {}}, Case{"zero1", planner::PluginKind::low_level_zero, 1, {}},
                        Case{"zero2", planner::PluginKind::low_level_zero, 2, {}},
                        Case{"fsdp_full_shard", planner::PluginKind::torch_fsdp, 0, planner::FsdpStrategy::full_shard},
                        Case{"fsdp_shard_grad_op", planner::PluginKind::torch_fsdp, 0, planner::FsdpStrategy::shard_grad_op},
                        Case{"torch_ddp_bf16", planner::PluginKind::torch_ddp, 0, {}, bf16},
                        Case{"zero1_bf16", planner::PluginKind::low_level_zero, 1, {}, bf16},
                        Case{"zero2_bf16", planner::PluginKind::low_level_zero, 2, {}, bf16},
                        // ZeRO-2 with a bucket of 40,000 elements: filled and reduce-scattered during every backward.
                        Case{"zero2_bucketed", planner::PluginKind::low_level_zero, 2, {}, planner::Precision::fp32, false, {}, 0, 0, 1, 0, 40000},
                        Case{"zero2_bucketed_bf16", planner::PluginKind::low_level_zero, 2, {}, bf16, false, {}, 0, 0, 1, 0, 40000},
                        Case{"fsdp_full_shard_bf16", planner::PluginKind::torch_fsdp, 0, planner::FsdpStrategy::full_shard, bf16},
                        Case{"zero1_offload", planner::PluginKind::low_level_zero, 1, {}, planner::Precision::fp32, true},
                        Case{"zero2_offload_bf16", planner::PluginKind::low_level_zero, 2, {}, bf16, true},
                        Case{"gemini_cuda_bf16", planner::PluginKind::gemini, 0, {}, bf16},
                        Case{"gemini_cpu_bf16", planner::PluginKind::gemini, 0, {}, bf16, false, planner::GeminiPlacement::cpu},
                        Case{"gemini_one_chunk_bf16", planner::PluginKind::gemini, 0, {}, bf16, false, planner::GeminiPlacement::cuda, 0},
                        // c_fc and the MLP's c_proj (65,536 elements) get chunks of their own, as ColossalAI's ChunkManager gives them.
                        Case{"gemini_own_chunks_bf16", planner::PluginKind::gemini, 0, {}, bf16, false, planner::GeminiPlacement::cuda, 40000},
                        // The optimizer states of the first 2 of 5 chunks on the host, as ColossalAI's static placement sends them.
                        Case{"gemini_static_bf16", planner::PluginKind::gemini, 0, {}, bf16, false, planner::GeminiPlacement::static_placement, 1 << 17, 0.05},
                        // shard_param_frac 0.9: ColossalAI's budget keeps the last chunks of forward gathered into backward.
                        Case{"gemini_kept_gathered_bf16", planner::PluginKind::gemini, 0, {}, bf16, false, planner::GeminiPlacement::static_placement, 1 << 17,
                             0, 0.9},
                        // offload_param_frac 0.95: only the MLP matrices' own chunks are above ColossalAI's budget and go to the host.
                        Case{"gemini_some_parameters_on_host_bf16", planner::PluginKind::gemini, 0, {}, bf16, false,
                             planner::GeminiPlacement::static_placement, 40000, 1, 1, 0.95}}) {
    const bool gemini = c.kind == planner::PluginKind::gemini;
    const bool fsdp = c.kind == planner::PluginKind::torch_fsdp;
    planner::PluginOptions plugin;
    plugin.kind = c.kind;
    plugin.fsdp_strategy = c.fsdp;
    plugin.cpu_offload = c.cpu_offload;
    plugin.gemini.placement_policy = c.placement;
    plugin.gemini.chunk_size = c.chunk_size;  // 0: ColossalAI's search (one 32 Mi-element chunk holds all of tiny-gpt2)
    plugin.gemini.offload_optim_frac = c.offload_optim_frac;
    plugin.gemini.shard_param_frac = c.shard_param_frac;
    plugin.gemini.offload_param_frac = c.offload_param_frac;
    plugin.zero_stage = c.kind == planner::PluginKind::low_level_zero ? c.zero_stage : -1;
    plugin.bucket_bytes = 256 << 10;             // DDP: several buckets
    plugin.reduce_bucket_numel = c.zero_stage == 1 ? 40000 : c.zero2_bucket > 0 ? c.zero2_bucket : params;  // ZeRO-1: several buckets; ZeRO-2: one unless given
    expect(c.zero2_bucket == 0 || planner::zero2_bucket_numel(model.inventory, c.zero2_bucket, ranks) < planner::padded_flat_numel(params, ranks),
           std::string(c.name) + ": the bucket is not smaller than the model", rank);
    const std::string parallel_dir = root + "/" + c.name, single_dir = root + "/" + c.name + "-one-rank";
    auto parallel = train_into(parallel_dir, options(plugin, k, c.precision), world.get(), model);
    expect(parallel.ok(), std::string(c.name) + ": " + (parallel.ok() ? "" : parallel.error().message), rank);
    if (!parallel.ok()) continue;
    // Bytes per step: DDP all-reduces every gradient once (4 · params); ZeRO
    // reduce-scatters the padded gradients and all-gathers the padded
    // parameters (4 · padded each) and all-reduces the gradient norm's sum of
    // squares (one f64). FSDP, per micro-batch: every unit gathered for
    // forward, the blocks again for backward under full_shard (the root stays
    // gathered), every unit's gradient reduce-scattered; plus the norm. The
    // loss, stop and save agreements travel apart.
    const comm::CommCounters& moved = parallel->communication;
    const int64_t padded = planner::padded_flat_numel(params, ranks), steps = 5;
    const int64_t blocks_again = c.fsdp == planner::FsdpStrategy::full_shard ? units.padded_total - units.root_padded : 0;
    const int64_t width = c.precision == bf16 ? 2 : 4;  // gradients and parameters travel in their own type
    const int64_t all_reduce_bytes = c.kind == planner::PluginKind::torch_ddp ? steps * width * params : steps * 8;
    // Bucketed ZeRO-2 reduces every layer's gradients in every backward, a tied weight at the head and at the embeddings.
    const std::vector<int64_t> layer_gradients = planner::gradient_numel_by_layer(model.inventory);
    const int64_t backward_gradients = std::accumulate(layer_gradients.begin(), layer_gradients.end(), int64_t{0});
    const int64_t reduce_scatter_bytes = fsdp                ? steps * k * width * units.padded_total
                                         : c.zero2_bucket > 0 ? steps * k * width * backward_gradients
                                         : c.zero_stage > 0   ? steps * width * padded
                                                              : 0;
    const int64_t all_gather_bytes = fsdp ? steps * k * width * (units.padded_total + blocks_again) : c.zero_stage > 0 ? steps * width * padded : 0;
    // Gemini moves whole chunks as planner::GeminiGathering decides, and the
    // planner's replay of a step counts them: with one chunk that every layer
    // uses, it is gathered once per step (it stays gathered from micro-batch
    // to micro-batch) and its gradient reduce-scattered once, at the step's end.
    if (gemini) {
      const planner::ChunkLayout layout = planner::pack_chunks(model.inventory, planner::gemini_chunk_size(model.inventory, plugin.gemini, ranks), ranks);
      const planner::GeminiChunkSet set{layout.chunk_capacity, planner::chunks_by_layer(layout, model.inventory, static_cast<int>(model.config.num_layers)),
                                        planner::kept_gathered_elements(layout, plugin.gemini), planner::parameter_chunks_on_host(layout, plugin.gemini)};
      const planner::GeminiStepReplay step = planner::replay_gemini_step(set, ranks, width, width, k);
      const bool one_chunk = layout.num_chunks() == 1;
      expect(!one_chunk || (step.gathered_elements == layout.chunk_capacity[0] && step.reduced_elements == layout.chunk_capacity[0]),
             std::string(c.name) + ": one chunk is not gathered and reduced once a step", rank);
      expect(moved.bytes_of(comm::Collective::all_gather) == steps * width * step.gathered_elements &&
                 moved.bytes_of(comm::Collective::reduce_scatter) == steps * width * step.reduced_elements &&
                 moved.bytes_of(comm::Collective::all_reduce) == steps * 8,
             std::string(c.name) + ": all_gather " + std::to_string(moved.bytes_of(comm::Collective::all_gather)) + " (replay " +
                 std::to_string(steps * width * step.gathered_elements) + "), reduce_scatter " +
                 std::to_string(moved.bytes_of(comm::Collective::reduce_scatter)) + " (replay " + std::to_string(steps * width * step.reduced_elements) + ")",
             rank);
      // Without shards on the host, only the chunks that exchange through the
      // host cross PCIe: gradients down and weights up once a step, as the GPU step moves them.
      const GeminiChunkPlan plan = gemini_chunk_plan(model, plugin.gemini, ranks);
      if (std::none_of(plan.chunks.begin(), plan.chunks.end(), [](const GeminiChunk& g) { return g.on_host; })) {
        const auto exchanging = std::count_if(plan.chunks.begin(), plan.chunks.end(), [](const GeminiChunk& g) { return g.exchanges_through_host(); });
        expect(parallel->chunk_moves == steps * 2 * exchanging,
               std::string(c.name) + ": chunk moves " + std::to_string(parallel->chunk_moves) + ", not 2 a step for each of " + std::to_string(exchanging) +
                   " chunks exchanging through the host",
               rank);
      }
    }
    expect(gemini || moved.bytes_of(comm::Collective::all_reduce) == all_reduce_bytes,
           std::string(c.name) + ": all_reduce bytes " + std::to_string(moved.bytes_of(comm::Collective::all_reduce)), rank);
    expect(gemini || moved.bytes_of(comm::Collective::reduce_scatter) == reduce_scatter_bytes,
           std::string(c.name) + ": reduce_scatter bytes " + std::to_string(moved.bytes_of(comm::Collective::reduce_scatter)), rank);
    expect(gemini || moved.bytes_of(comm::Collective::all_gather) == all_gather_bytes,
           std::string(c.name) + ": all_gather bytes " + std::to_string(moved.bytes_of(comm::Collective::all_gather)), rank);
    if (rank == 0) {
      auto single = train_into(single_dir, options(plugin, k * ranks, c.precision), nullptr, model);
      expect(single.ok(), std::string(c.name) + " on one rank: " + (single.ok() ? "" : single.error().message), rank);
      if (!single.ok()) continue;
      const double tolerance = c.precision == bf16 ? kBf16Tolerance : 1e-5;
      expect(std::abs(single->loss.back() - parallel->loss.back()) < tolerance * std::abs(single->loss.back()), std::string(c.name) + ": final loss differs", rank);
      const double difference = relative_difference(read_model(parallel_dir, model), read_model(single_dir, model));
      std::printf("%s on %d ranks: parameters after 5 steps differ from one rank's by %.3g of their norm\n", c.name, ranks, difference);
      expect(difference < tolerance, std::string(c.name) + ": parameters differ by " + std::to_string(difference), rank);
    }
  }
  return training_check::finish(*world, root);
}
