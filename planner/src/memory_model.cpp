// The memory model: per pipeline stage, the bytes of every category on the
// device and the host. Sources are cited where each formula is applied.
#include "tessera/planner/memory_model.h"

#include "tessera/planner/sharding.h"

#include <algorithm>
#include <cmath>

#include "tessera/planner/activations.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/fsdp_offload.h"
#include "tessera/planner/gemini_gathering.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/pp_traffic.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/rank_order_reduction.h"
#include "model_states.h"
#include "retained_between_steps.h"
#include "simulation_memo.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
constexpr MemorySpace kDevice = MemorySpace::device;
constexpr MemorySpace kHost = MemorySpace::host;

int64_t round_bytes(double bytes) { return static_cast<int64_t>(std::llround(bytes)); }

// Byte widths of the model states under the request's precision and optimizer.
struct StateWidths {
  int64_t param;   // 16-bit under mixed precision, else 4
  int64_t grad;    // gradients in the compute dtype
  int64_t master;  // fp32 master copy under mixed precision (Micikevicius et al. 2018), else 0
  int64_t optim;   // fp32 optimizer states: 8 for Adam, 4 for SGD with momentum
};

StateWidths state_widths(const TrainingOptions& t) {
  const int64_t p = compute_bytes(t.precision);
  return StateWidths{p, p, is_mixed_precision(t.precision) ? 4 : 0, 4 * optimizer_state_count(t.optimizer)};
}

// The engine's offload buffers (pinned_host_blocks.h): pinned in its GPU
// step, so held at the pinned allocator's powers of two; pageable on the CPU.
HostBlockSizing engine_host_sizing(const TrainingOptions& t) {
  return t.activation_profile == ActivationProfile::tessera_gpu ? HostBlockSizing::pinned : HostBlockSizing::exact;
}


// The tied sum's rank-order scratch on an end stage of a pipeline: a DDP
// bucket's piece of the embedding over the 2 stages (0 elsewhere, or without
// rank-order sums).
int64_t tied_sum_scratch_bytes(const Model& m, const StageShape& s, const EstimateRequest& r, const StateWidths& w) {
  const int64_t tied = r.layout.pp > 1 && (s.first || s.last) ? m.tied_head.per_tp_rank(r.layout.tp) : 0;
  return tied > 0 && r.plugin.rank_order_reduction ? ddp_rank_order_scratch_bytes(tied, r.plugin.bucket_bytes, 2, w.grad) : 0;
}

// Torch DDP and ColossalAI's hybrid plugin at ZeRO stage 0: every state replicated.
// DDP copies all gradients into its buckets unless gradient_as_bucket_view is set
// (PyTorch DistributedDataParallel docs: "gradient_as_bucket_view ... the saved
// memory size will be equal to the total gradients size"): the Reducer
// allocates every bucket's flat tensor when it is built and copies the
// gradients in before the all-reduce, unless they are views into it
// (pytorch/pytorch@00413201d3d38d5b5bb039180220d5a0d6c74052,
// torch/csrc/distributed/c10d/reducer.cpp: Reducer::initialize_buckets'
// replica.contents = at::empty(...), initialize_bucket_views). Tessera's
// engine on GPUs reduces its flat gradients in place (gradient_as_bucket_view)
// and stages one bucket at a time for its rank-order sum (rank_order_reduction.h).
// In a pipeline it also sums a tied embedding's gradient between the first and
// the last stage, in pieces of a bucket (cuda/gpt_training.h), before DDP's
// buckets start: one of the two scratches is held at a time.
void add_replicated_states(const Model& m, const StageShape& s, const EstimateRequest& r, const StateWidths& w, bool ddp_wrapped,
                           MemoryBreakdown& out) {
  out.add(Cat::parameters, kDevice, s.params * w.param);
  out.add(Cat::master_weights, kDevice, s.params * w.master);
  out.add(Cat::gradients, kDevice, s.params * w.grad);
  out.add(Cat::optimizer_states, kDevice, s.params * w.optim);
  if (ddp_wrapped && !r.plugin.gradient_as_bucket_view) out.add(Cat::comm_buffers, kDevice, s.params * w.grad);
  const int64_t dp = r.layout.data_ranks();
  const bool ddp = r.plugin.kind == PluginKind::torch_ddp || r.plugin.kind == PluginKind::hybrid_parallel;  // hybrid_parallel at ZeRO stage 0
  if (!ddp || !r.plugin.rank_order_reduction) return;
  const int64_t buckets = dp > 1 ? ddp_rank_order_scratch_bytes(s.params, r.plugin.bucket_bytes, dp, w.grad) : 0;
  out.add(Cat::comm_buffers, kDevice, std::max(buckets, tied_sum_scratch_bytes(m, s, r, w)));
}

// ZeRO-1/2 (Rajbhandari et al. 2020 §5.1-5.2; ColossalAI LowLevelZeroOptimizer):
// the fp32 master weights and optimizer states are sharded over dp, and at stage 2
// the gradients too; gradients are reduced through a bucket of reduce_bucket_size.
// With CPU offload the master weights, optimizer states and an fp32 gradient
// shard live on the host, where the CPU optimizer steps (ZeRO-Offload, Ren et al. 2021).
void add_zero_states(const StageShape& s, const EstimateRequest& r, const StateWidths& w, int stage, int64_t bucket_numel,
                     MemoryBreakdown& out) {
  // The flat buffers are padded to dp equal shards (sharding.h), which the
  // parameters and full gradients keep so that the collectives run in place.
  const int64_t dp = r.layout.shard_ranks();
  const int64_t shard = shard_numel(s.params, dp), padded = padded_flat_numel(s.params, dp);
  const MemorySpace optimizer_space = r.plugin.cpu_offload ? kHost : kDevice;
  out.add(Cat::parameters, kDevice, padded * w.param);
  out.add(Cat::gradients, kDevice, (stage >= 2 ? shard : padded) * w.grad);
  out.add(Cat::master_weights, optimizer_space, shard * w.master);
  out.add(Cat::optimizer_states, optimizer_space, shard * w.optim);
  // The runtimes' ZeRO-Offload gradient shard is pageable (pinned_host_blocks.h), as the CPU engine's.
  if (r.plugin.cpu_offload) add_host_blocks({zero_offload_transfer_block(shard)}, engine_host_sizing(r.training), out);
  if (dp > 1) out.add(Cat::comm_buffers, kDevice, bucket_numel * w.grad);
}

// PyTorch FSDP (Zhao et al. 2023, "PyTorch FSDP"): each block is a unit whose
// flat parameter is padded and sharded over dp (sharding.h, fsdp_layout).
// Under MixedPrecision the shard stays fp32 (it is the optimizer's weight) and
// is cast to 16-bit when gathered; the sharded gradient is fp32 as well.
// FULL_SHARD frees a unit after use and keeps two units gathered (the current
// one and the prefetched one; limit_all_gathers) plus the root unit (embedding
// and head), which is not resharded after forward. SHARD_GRAD_OP keeps every
// unit gathered from forward to backward. In backward the root's unsharded
// gradient lives from the head's backward (the first) to the embedding's (the
// last), beside the gradient of the block being reduce-scattered.
// Tessera's engine on GPUs reduce-scatters each unit's gradient in rank order
// (rank_order_reduction.h): while a unit's reduce-scatter is queued its
// scratch, the whole unit in the gradients' type, comes beside the root's and
// a block's gradients (engine/device/fsdp_device_units.h).
// With CPU offload every shard lives on the host and one unit's shard at a
// time passes through the device each way (fsdp_offload.h); the weight and
// gradient shards are pinned blocks, one per unit under FSDP1 and one for
// every unit in the engine's GPU step (pinned_host_blocks.h).
void add_fsdp_states(const Model& m, const EstimateRequest& r, const StateWidths& w, MemoryBreakdown& out) {
  const int64_t dp = r.layout.shard_ranks();
  const FsdpLayout layout = fsdp_layout(m.inventory, flat_parameter_order(m.inventory), dp);
  const bool offload = r.plugin.fsdp_offload();
  const MemorySpace shards = offload ? kHost : kDevice;
  out.add(Cat::optimizer_states, shards, layout.shard_numel * w.optim);
  if (!offload) {
    out.add(Cat::parameters, kDevice, layout.shard_numel * 4);
    out.add(Cat::gradients, kDevice, layout.shard_numel * 4);
  } else {
    if (is_tessera_engine(r.training.activation_profile)) {
      const FsdpOffloadBlocks blocks = fsdp_offload_blocks(layout.shard_numel);
      add_host_blocks({blocks.weights, blocks.gradients}, engine_host_sizing(r.training), out);
    } else {
      add_host_blocks(fsdp1_offload_pinned_blocks(layout), HostBlockSizing::pinned, out);
    }
    const int64_t staging = fsdp_offload_staging_numel(layout) * kFsdpOffloadBytesPerElement;
    out.add(Cat::parameters, kDevice, staging);
    out.add(Cat::gradients, kDevice, staging);
  }
  const bool gathers = dp > 1 || w.param != 4 || offload;  // one fp32 rank unshards in place, unless its shard is on the host
  if (gathers) {
    const int64_t gathered = r.plugin.fsdp_strategy == FsdpStrategy::full_shard
                                 ? layout.root_padded + 2 * layout.largest_block_padded
                                 : layout.padded_total;
    out.add(Cat::chunk_buffers, kDevice, gathered * w.param);
    out.add(Cat::comm_buffers, kDevice, (layout.root_padded + layout.largest_block_padded) * w.grad);
  }
  if (r.plugin.rank_order_reduction && dp > 1) {
    out.add(Cat::comm_buffers, kDevice, rank_order_scratch_bytes(std::max(layout.root_padded, layout.largest_block_padded), dp, w.grad));
  }
}

// The step under the summary's placement, replayed once for the memory
// model (the chunk buffers' peak) and the simulator (the traffic).
void replay_step(const EstimateRequest& r, GeminiSummary& g) {
  const StateWidths w = state_widths(r.training);
  const int64_t dp = r.layout.shard_ranks();
  g.step = replay_gemini_step(g.chunk_set(), dp, w.param, w.grad, r.training.num_micro_batches);
  // A chunk exchanging through the host: its reduced gradient shard down, its updated weights up, once a step.
  for (size_t c = 0; c < g.chunk_capacity.size(); ++c) {
    if (!exchanges_through_host(g.optimizer_chunk_on_host(c), g.parameter_chunk_on_host(c))) continue;
    g.step.host_down_bytes += g.chunk_capacity[c] / dp * w.grad;
    g.step.host_up_bytes += g.chunk_capacity[c] / dp * w.param;
  }
}

// The placement Gemini ends up with; "auto" is solved later against the GPU.
GeminiSummary gemini_placement(const GeminiOptions& g) {
  GeminiSummary p;
  switch (g.placement_policy) {
    case GeminiPlacement::cuda: break;  // shard 1, offload 0, 0
    case GeminiPlacement::cpu: p.offload_optim_frac = 1; break;
    case GeminiPlacement::static_placement:  // the chunks each fraction moves, in plan_gemini
      p.shard_param_frac = g.shard_param_frac;
      break;
    case GeminiPlacement::auto_placement: break;  // solved against the GPU in estimate_memory (solve_auto_placement)
  }
  return p;
}

// Gemini (ColossalAI GeminiDDP, chunk-based ZeRO-3): every chunk is sharded
// over dp; a chunk's 16-bit parameter and gradient shards live on the device
// or on the host (GeminiSummary::parameters_on_host), its fp32 master weights
// and optimizer states follow offload_optim_frac, and a device chunk whose
// states are on the host keeps a host copy of its 16-bit shard to trade
// gradients and weights through (exchanges_through_host). While layers run, their
// chunks are gathered whole (and, in backward, a gradient chunk beside each)
// and others may stay gathered under shard_param_frac: the peak of these
// buffers is the engine's own gathering replayed (gemini_gathering.h). The
// host shards and copies are the engine's pinned blocks (pinned_host_blocks.h).
// ColossalAI itself, under pin_memory (its default), pins a host copy of
// every chunk's 16-bit, gradient and fp32 master shards wherever the chunk
// lives (colossalai_gemini_pinned_blocks).
void add_gemini_states(const EstimateRequest& r, const StateWidths& w,
                       const GeminiSummary& g, MemoryBreakdown& out) {
  const int64_t dp = r.layout.shard_ranks();
  const bool pins_every_chunk = colossalai_pins_every_chunk(r.plugin, r.training);
  int64_t on_device = 0;  // shard elements of the parameter chunks on the device
  std::vector<PinnedHostBlock> host_blocks;
  for (size_t c = 0; c < g.chunk_capacity.size(); ++c) {
    const int64_t shard = g.chunk_capacity[c] / dp;
    if (!g.parameter_chunk_on_host(c)) on_device += shard;
    if (pins_every_chunk) {
      const std::vector<PinnedHostBlock> pinned = colossalai_gemini_pinned_blocks(shard, w.param, w.grad, w.master);
      host_blocks.insert(host_blocks.end(), pinned.begin(), pinned.end());
      continue;
    }
    const GeminiChunkHostBlocks b = gemini_chunk_host_blocks(shard, g.parameter_chunk_on_host(c), g.optimizer_chunk_on_host(c), w.param, w.grad);
    host_blocks.insert(host_blocks.end(), {b.weights, b.gradients, b.exchange});
  }
  out.add(Cat::parameters, kDevice, on_device * w.param);
  out.add(Cat::gradients, kDevice, on_device * w.grad);
  add_host_blocks(host_blocks, pins_every_chunk ? HostBlockSizing::pinned : engine_host_sizing(r.training), out);
  const double optimizer_elements = static_cast<double>(g.padded_elements() / dp);
  for (auto [category, width] : {std::pair{Cat::master_weights, w.master}, std::pair{Cat::optimizer_states, w.optim}}) {
    const double bytes = optimizer_elements * static_cast<double>(width);
    out.add(category, kDevice, round_bytes(bytes * (1 - g.offload_optim_frac)));
    const bool in_pinned_chunks = pins_every_chunk && category == Cat::master_weights;
    if (!in_pinned_chunks) out.add(category, kHost, round_bytes(bytes * g.offload_optim_frac));
  }
  out.add(Cat::chunk_buffers, kDevice, g.step.peak_buffer_bytes);
}

void add_activations(const Model& m, const StageShape& s, const EstimateRequest& r, MemoryBreakdown& out) {
  const TrainingOptions& t = r.training;
  const StageActivations& parts = s.activations;
  int64_t kept = 0;  // the passes held at the peak, logits included
  for (size_t j = 0; j < parts.pass_bytes.size(); ++j) kept += s.in_flight_per_chunk[j] * parts.pass_bytes[j];
  const int64_t logits = s.in_flight_per_chunk.back() * parts.logits_per_pass;
  out.add(Cat::activations, kDevice, kept - logits + parts.transient_beyond(logits));
  if (s.last) out.add(Cat::logits, kDevice, logits);
  // Pipeline send/recv buffers: one activation and one gradient per neighbouring
  // stage, each (s/t if sequence parallel, b, h) in the compute dtype (Megatron p2p).
  // Interleaved, every stage also exchanges with the wrap-around neighbour (chunk j of the last stage feeds chunk j + 1 of the first).
  const int64_t neighbours = s.chunks.size() > 1 ? 2 : (s.first ? 0 : 1) + (s.last ? 0 : 1);
  const int64_t boundary = stage_boundary_bytes(t.micro_batch_size, r.local_seq_len(), m.config.hidden_size, t.precision, r.layout);
  out.add(Cat::comm_buffers, kDevice, neighbours * 2 * boundary);
}

// cuBLAS workspace, NCCL buffers per communicator the rank uses, the CUDA
// context, and the caching allocator's fragmentation reserve on everything else.
void add_runtime(const EstimateRequest& r, int64_t cuda_context, MemoryBreakdown& out) {
  const auto& l = r.layout;
  const int64_t groups = (l.data_ranks() > 1 ? 1 : 0) + (l.tp > 1 ? 1 : 0) + (l.pp > 1 ? 1 : 0) + (l.cp > 1 ? 1 : 0) +
                         (l.dp_replicate > 1 ? 1 : 0);  // a replica group besides the shard group
  out.add(Cat::workspace, kDevice, r.assumptions.cublas_workspace_bytes + groups * r.assumptions.nccl_bytes_per_group);
  const int64_t reserve = round_bytes(static_cast<double>(out.device_total()) * r.assumptions.allocator_reserve_fraction);
  out.add(Cat::runtime, kDevice, cuda_context + reserve);
}

// ColossalAI's Booster plugins (and Tessera's engine, which follows them).
void add_colossalai_states(const Model& m, const StageShape& s, const EstimateRequest& r, const GeminiSummary* gemini,
                           MemoryBreakdown& out) {
  const StateWidths w = state_widths(r.training);
  switch (r.plugin.kind) {
    case PluginKind::torch_ddp: add_replicated_states(m, s, r, w, true, out); break;
    case PluginKind::torch_fsdp: add_fsdp_states(m, r, w, out); break;
    case PluginKind::low_level_zero: {
      const int stage = r.plugin.effective_zero_stage();
      const int64_t dp = r.layout.shard_ranks();
      // Its buckets, two where backward's reductions overlap (sharding.h, zero_reduce_buckets).
      add_zero_states(s, r, w, stage, zero_reduce_buckets(m.inventory, stage, r.plugin.reduce_bucket_numel, dp).total_numel(), out);
      break;
    }
    case PluginKind::gemini: add_gemini_states(r, w, *gemini, out); break;
    case PluginKind::hybrid_parallel: {
      const int stage = r.plugin.effective_zero_stage();
      // Tessera's engine on GPUs sums the tensor-parallel layers' (b·s, h)
      // partial outputs and input gradients in rank order too
      // (rank_order_reduction.h), in the 16-bit activations' type, one call at a time.
      // Under sequence parallelism the same sums are reduce-scatters, which
      // stage the same payload (tp rows of b·s/tp · h: comm/nccl.h's do_reduce_scatter).
      // Under context parallelism s is this rank's s/cp tokens (engine/src/cuda/gpt_training.cpp: N = b · s/cp rows).
      const int64_t rows = r.training.micro_batch_size * r.local_seq_len();
      const int64_t tp_scratch =
          r.plugin.rank_order_reduction && r.layout.tp > 1 ? rank_order_scratch_bytes(rows * m.config.hidden_size, r.layout.tp, w.param) : 0;
      if (stage == 0) {
        add_replicated_states(m, s, r, w, r.layout.data_ranks() > 1, out);
        if (tp_scratch > 0) out.add(Cat::comm_buffers, kDevice, tp_scratch);  // beside a DDP bucket's sum, which may be in flight
      } else {
        // One bucket, reduced after backward (sharding.h, hybrid_zero_buckets).
        const int64_t bucket = hybrid_zero_buckets(s.params, stage, r.plugin.reduce_bucket_numel, r.layout.shard_ranks()).total_numel();
        add_zero_states(s, r, w, stage, bucket, out);
        // Its reduce-scatters stage a bucket's payload for the rank-order sum
        // too (comm/nccl.h); they start after backward, and after a
        // pipeline's tied embedding sum (ZeRO-1: check_zero_stage_with_pipeline),
        // so never beside a tensor-parallel sum's or the tied sum's scratch: the largest of the three.
        const int64_t dp_scratch = r.plugin.rank_order_reduction && r.layout.shard_ranks() > 1 ? bucket * w.grad : 0;
        const int64_t scratch = std::max({tp_scratch, dp_scratch, tied_sum_scratch_bytes(m, s, r, w)});
        if (scratch > 0) out.add(Cat::comm_buffers, kDevice, scratch);
      }
      break;
    }
  }
}

// Transformer Engine's FP8 state for the stage's blocks (fp8.h): the FP8 copy
// and transpose of every GEMM weight the rank holds, and each GEMM's scaling
// factors and amax history. Counted as parameters: they are weights in another dtype.
void add_fp8_state(const Model& m, const StageShape& s, const EstimateRequest& r, MemoryBreakdown& out) {
  if (is_fp8(r.training.precision)) out.add(Cat::parameters, kDevice, fp8_state_bytes(m, s.chunks, r.layout.tp, r.plugin.fp8_param_gather));
}

MemoryBreakdown stage_memory(const Model& m, const StageShape& s, const EstimateRequest& r,
                             const GeminiSummary* gemini, int64_t cuda_context) {
  MemoryBreakdown out;
  switch (r.plugin.runtime) {
    case Runtime::megatron: add_megatron_states(m, s, r, out); break;
    case Runtime::torchtitan: add_fsdp2_states(m, r, out); break;
    case Runtime::deepspeed:
      if (r.plugin.deepspeed_pipeline()) {
        add_deepspeed_pipeline_states(s, r, out);
      } else {
        add_deepspeed_zero3_states(m, r, out);
      }
      break;
    case Runtime::colossalai: add_colossalai_states(m, s, r, gemini, out); break;
  }
  add_fp8_state(m, s, r, out);
  add_activations(m, s, r, out);
  if (r.plugin.deepspeed_pipeline()) add_deepspeed_reduce_copy(s, r, out);  // outlives the activations
  add_runtime(r, cuda_context, out);
  return out;
}

GeminiSummary plan_gemini(const Model& m, const EstimateRequest& r) {
  const GeminiOptions& g = r.plugin.gemini;
  GeminiSummary summary = gemini_placement(g);
  summary.chunk_size = gemini_chunk_size(m.inventory, g, r.layout.shard_ranks());
  const ChunkLayout layout = pack_chunks(m.inventory, summary.chunk_size, r.layout.shard_ranks());
  summary.num_chunks = layout.num_chunks();
  summary.chunk_used = layout.chunk_used;
  summary.chunk_capacity = layout.chunk_capacity;
  summary.waste_elements = layout.waste_elements();
  const int layers = static_cast<int>(m.config.num_layers);
  summary.peak_gathered_chunks = peak_chunks_per_layer(layout, m.inventory, layers);
  summary.chunks_of_layer = chunks_by_layer(layout, m.inventory, layers);
  summary.kept_gathered_elements = kept_gathered_elements(layout, g);
  summary.set_parameters_on_host(parameter_chunks_on_host(layout, g));
  summary.chunk_tensors.assign(static_cast<size_t>(layout.num_chunks()), 0);
  for (const int chunk : layout.tensor_chunk) {
    if (chunk >= 0) ++summary.chunk_tensors[static_cast<size_t>(chunk)];
  }
  if (g.placement_policy == GeminiPlacement::static_placement) {
    // Whole chunks, as many as ColossalAI's walk sends (gemini_static_placement.h).
    summary.optimizer_chunks_on_host = optimizer_chunks_on_host(layout, g);
    summary.offload_optim_frac = static_cast<double>(leading_chunk_elements(layout, summary.optimizer_chunks_on_host)) /
                                 static_cast<double>(layout.padded_elements());
  }
  replay_step(r, summary);
  return summary;
}

// Gemini "auto" (ColossalAI v0.5.0, colossalai/zero/gemini/placement_policy.py,
// AutoPlacementPolicy): setup_grads_device puts every chunk's fp32 master
// weights and optimizer states on the host (the CPU Adam updates them there),
// and evict_tensors moves parameter chunks off the device only while the
// model data would pass steady_cuda_cap_ratio (0.9) of it less the non-model
// data it measured. It evicts the chunks whose next use is farthest
// (_sort_can_evict_chunks): in forward those are the earliest chunks, which
// backward uses last. In the steady state that is the fewest leading chunks
// on the host that bring the device under that share; the device's bytes
// fall as chunks leave, so a bisection finds it.
void solve_auto_placement(const Model& m, const StageShape& s, const EstimateRequest& r, int64_t capacity,
                          int64_t cuda_context, GeminiSummary& g) {
  const double target = r.assumptions.auto_placement_cuda_fraction * static_cast<double>(capacity);
  g.offload_optim_frac = 1;
  const auto fits_with = [&](int64_t leading_on_host) {
    std::vector<bool> on_host(static_cast<size_t>(g.num_chunks), false);
    std::fill_n(on_host.begin(), leading_on_host, true);
    g.set_parameters_on_host(std::move(on_host));
    replay_step(r, g);
    return static_cast<double>(stage_memory(m, s, r, &g, cuda_context).device_total()) <= target;
  };
  int64_t low = 0, high = g.num_chunks;  // the answer lies in [low, high]; all of them when nothing fits
  while (low < high) {
    const int64_t middle = (low + high) / 2;
    if (fits_with(middle)) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  fits_with(low);
}

RankMemory make_row(const StageShape& s, const EstimateRequest& r, const MemoryBreakdown& bytes, int64_t capacity) {
  const int64_t ranks_per_stage = r.layout.data_ranks() * r.layout.tp;
  RankMemory row;
  row.first_stage = row.last_stage = s.stage;
  row.first_rank = s.stage * ranks_per_stage;
  row.last_rank = row.first_rank + ranks_per_stage - 1;
  row.first_layer = s.first_layer;
  row.last_layer = s.chunks.back().first_layer + s.chunks.back().num_layers - 1;
  row.has_embedding = s.first;
  row.has_head = s.last;
  row.in_flight_micro_batches = s.in_flight();
  if (s.chunks.size() > 1) row.layer_chunks = s.chunks;
  row.bytes = bytes;
  row.device_total = bytes.device_total();
  row.host_total = bytes.host_total();
  row.gpu_capacity = capacity;
  row.headroom = r.assumptions.memory_headroom(capacity);
  row.margin = capacity - row.headroom - row.device_total;
  return row;
}

// Consecutive stages with the same bytes and role share one row (not under
// interleaving, where each stage's blocks are several ranges of its own).
bool same_row(const RankMemory& a, const RankMemory& b) {
  return a.bytes == b.bytes && a.retained_between_steps == b.retained_between_steps && a.has_embedding == b.has_embedding &&
         a.has_head == b.has_head && a.in_flight_micro_batches == b.in_flight_micro_batches && a.layer_chunks.empty() && b.layer_chunks.empty() &&
         (a.last_layer - a.first_layer) == (b.last_layer - b.first_layer);
}

// What one block keeps for a micro-batch under the request's recompute, and
// under --recompute-num-layers what a block outside the recomputed ones keeps:
// everything it saves (recompute_blocks.h).
struct BlockKinds {
  BlockActivationBytes recomputed, other;
};

BlockKinds block_kinds(const ActivationTable& table, const ActivationShape& shape, const TrainingOptions& t) {
  const BlockActivationBytes block = block_activation_bytes(table, shape, t.recompute);
  if (t.recompute != RecomputeMode::full || t.recompute_num_layers == 0) return {block, block};
  return {block, block_activation_bytes(table, shape, RecomputeMode::none)};
}

// A stage's activations, from its request's table and shape and what its
// blocks keep, written into `parts` (whose buffer is reused from stage to stage).
void fill_stage_activations(const ActivationTable& table, const ActivationShape& shape, const BlockKinds& blocks, const TrainingOptions& t,
                            const StageShape& s, StageActivations& parts) {
  parts.pass_bytes.clear();
  parts.working = 0;
  for (const StageLayers& chunk : s.chunks) {
    const int64_t recomputed = blocks_recomputed_whole(t, chunk.num_layers), other = chunk.num_layers - recomputed;
    // Each model chunk's forward hands its recomputed blocks their shared inputs once.
    parts.pass_bytes.push_back(recomputed * blocks.recomputed.stash + other * blocks.other.stash + (recomputed > 0 ? blocks.recomputed.shared : 0));
    if (recomputed > 0) parts.working = std::max(parts.working, blocks.recomputed.working);
    if (other > 0) parts.working = std::max(parts.working, blocks.other.working);
  }
  if (s.first) parts.pass_bytes.front() += terms_bytes(table.first_stage, shape);
  parts.logits_per_pass = 0;
  if (s.last) {
    parts.logits_per_pass = terms_bytes(table.logits, shape);
    parts.pass_bytes.back() += terms_bytes(table.last_stage, shape) + parts.logits_per_pass;
  }
  parts.backward_scratch = terms_bytes(table.backward_scratch, shape);
  parts.working_after_logits = s.last && table.working_set_after_loss;
}

// Completes a stage of stage_layouts with what its passes keep and how many of
// them it holds at its peak (from `memo` where one is given).
void hold_activations(const ActivationTable& table, const ActivationShape& shape, const BlockKinds& blocks, const EstimateRequest& r,
                      SimulationMemo* memo, StageShape& s) {
  fill_stage_activations(table, shape, blocks, r.training, s, s.activations);
  const int64_t pp = r.layout.pp, m = r.training.num_micro_batches, chunks = r.plugin.model_chunks();
  if (memo && r.plugin.pp_schedule == PipelineSchedule::interleaved && pp > 1) {
    s.in_flight_per_chunk = memo->in_flight_at_peak(pp, s.stage, m, chunks, s.activations.pass_bytes);
  } else {
    s.in_flight_per_chunk = in_flight_at_peak(r.plugin.pp_schedule, pp, s.stage, m, chunks, s.activations.pass_bytes);
  }
}

Result<MemoryEstimate> estimate(const Model& model, const GpuProfile& gpu, const EstimateRequest& request, SimulationMemo* memo) {
  if (Status s = validate_request(model, gpu, request); !s) return s.error();
  MemoryEstimate estimate;
  estimate.cuda_context_bytes = request.assumptions.cuda_context_bytes >= 0 ? request.assumptions.cuda_context_bytes : gpu.cuda_context_bytes;
  GeminiSummary gemini;
  if (request.plugin.kind == PluginKind::gemini) gemini = plan_gemini(model, request);
  const TrainingOptions& t = request.training;
  const auto make_table = [&] { return request_activation_table(model.config, request.plugin, request.training); };
  ActivationTable own_table;
  const BlockAccounting block = block_accounting(model.config, request.plugin, t);
  const LossAccounting loss = loss_accounting(request.plugin, t);
  const ActivationTable& table =
      memo ? memo->activation_table(t.activation_profile, t.precision, t.transformers_version, block, loss, make_table) : (own_table = make_table());
  std::vector<StageShape> own_layouts;
  const std::vector<StageShape>& layouts = memo ? memo->stage_layouts(model, request) : (own_layouts = stage_layouts(model, request));
  const ActivationShape shape = activation_shape(request);
  const BlockKinds blocks = block_kinds(table, shape, t);
  StageShape s;  // each stage in turn, its buffers reused
  for (const StageShape& layout : layouts) {
    s = layout;
    hold_activations(table, shape, blocks, request, memo, s);
    if (request.plugin.kind == PluginKind::gemini && request.plugin.gemini.placement_policy == GeminiPlacement::auto_placement) {
      solve_auto_placement(model, s, request, gpu.memory_bytes - request.assumptions.memory_headroom(gpu.memory_bytes),
                           estimate.cuda_context_bytes, gemini);
    }
    RankMemory row = make_row(s, request, stage_memory(model, s, request, &gemini, estimate.cuda_context_bytes), gpu.memory_bytes);
    row.retained_between_steps = retained_between_steps(model, s, request);
    if (!estimate.ranks.empty() && same_row(estimate.ranks.back(), row)) {
      estimate.ranks.back().last_stage = row.last_stage;
      estimate.ranks.back().last_rank = row.last_rank;
      estimate.ranks.back().last_layer = row.last_layer;
    } else {
      estimate.ranks.push_back(std::move(row));
    }
  }
  if (request.plugin.kind == PluginKind::gemini) estimate.gemini = std::move(gemini);
  return estimate;
}

}  // namespace

int64_t StageShape::in_flight() const {
  int64_t passes = 0;
  for (int64_t n : in_flight_per_chunk) passes += n;
  return passes;
}

int64_t StageShape::in_flight_blocks() const {
  int64_t blocks = 0;
  for (size_t j = 0; j < chunks.size(); ++j) blocks += in_flight_per_chunk[j] * chunks[j].num_layers;
  return blocks;
}

std::vector<StageShape> stage_layouts(const Model& m, const EstimateRequest& r) {
  const auto& l = r.layout;
  auto layers = stage_chunks(static_cast<int>(m.config.num_layers), static_cast<int>(l.pp), static_cast<int>(r.plugin.model_chunks()));
  std::vector<StageShape> stages;
  stages.reserve(layers.size());
  for (int stage = 0; stage < static_cast<int>(layers.size()); ++stage) {
    StageShape s;
    s.stage = stage;
    s.chunks = std::move(layers[static_cast<size_t>(stage)]);
    s.first_layer = s.chunks.front().first_layer;
    s.first = stage == 0;
    s.last = stage == l.pp - 1;
    ParamTotals totals;
    for (const StageLayers& chunk : s.chunks) {
      s.num_layers += chunk.num_layers;
      for (int i = 0; i < chunk.num_layers; ++i) totals += m.blocks[static_cast<size_t>(chunk.first_layer + i)];
    }
    if (s.first) totals += m.embedding;
    if (s.last) totals += m.head;
    // With pp > 1 the last stage keeps its own copy of a tied embedding for the head
    // (Megatron-LM: word embeddings duplicated on the first and last stage).
    if (s.last && l.pp > 1) totals += m.tied_head;
    s.params = totals.per_tp_rank(l.tp);
    s.non_matmul_params = totals.non_matmul_per_tp_rank(l.tp);
    stages.push_back(std::move(s));
  }
  return stages;
}

std::vector<StageShape> stage_shapes(const Model& m, const EstimateRequest& r) {
  const ActivationTable table = request_activation_table(m.config, r.plugin, r.training);
  const ActivationShape shape = activation_shape(r);
  const BlockKinds blocks = block_kinds(table, shape, r.training);
  std::vector<StageShape> stages = stage_layouts(m, r);
  for (StageShape& s : stages) hold_activations(table, shape, blocks, r, nullptr, s);
  return stages;
}

bool MemoryEstimate::fits() const {
  return std::all_of(ranks.begin(), ranks.end(), [](const RankMemory& r) { return r.fits(); });
}

const RankMemory& MemoryEstimate::tightest() const {
  return *std::min_element(ranks.begin(), ranks.end(), [](const RankMemory& a, const RankMemory& b) { return a.margin < b.margin; });
}

Result<MemoryEstimate> estimate_memory(const Model& model, const GpuProfile& gpu, const EstimateRequest& request) {
  return estimate(model, gpu, request, nullptr);
}

Result<MemoryEstimate> estimate_memory(const Model& model, const GpuProfile& gpu, const EstimateRequest& request, SimulationMemo& memo) {
  return estimate(model, gpu, request, &memo);
}

void GeminiSummary::set_parameters_on_host(std::vector<bool> on_host) {
  parameters_on_host = std::move(on_host);
  int64_t host = 0;
  for (size_t c = 0; c < parameters_on_host.size(); ++c) host += parameters_on_host[c] ? chunk_capacity[c] : 0;
  offload_param_frac = static_cast<double>(host) / static_cast<double>(std::max<int64_t>(1, padded_elements()));
}

GeminiChunkSet GeminiSummary::chunk_set() const {
  std::vector<bool> on_host(chunk_capacity.size());
  for (size_t c = 0; c < on_host.size(); ++c) on_host[c] = parameter_chunk_on_host(c);
  return GeminiChunkSet{chunk_capacity, chunks_of_layer, kept_gathered_elements, std::move(on_host)};
}

int64_t GeminiSummary::padded_elements() const {
  int64_t padded = 0;
  for (int64_t capacity : chunk_capacity) padded += capacity;
  return padded;
}

}  // namespace tessera::planner
