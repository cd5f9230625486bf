// The step-time simulator; the model is described in simulate.h.
#include "tessera/planner/simulate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "tessera/planner/activations.h"
#include "tessera/planner/collectives.h"
#include "tessera/planner/context_parallel.h"
#include "tessera/planner/deepspeed_pipeline.h"
#include "tessera/planner/eager_elementwise.h"
#include "tessera/planner/flops.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/fsdp_offload.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/megatron_elementwise.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/optimizer_step.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/pp_traffic.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/tp_traffic.h"
#include "tessera/planner/vocab_parallel_loss.h"
#include "simulation_memo.h"

namespace tessera::planner {
namespace {

struct Link {
  double bytes_per_s = 1;
  double latency_s = 0;
};

// A group of `size` ranks `stride` apart (ranks run tp fastest, then dp, then pp):
// it stays on the intra-node link when its ranks share a node.
Link group_link(const ClusterSpec& c, int64_t size, int64_t stride) {
  const bool one_node = size <= 1 || (size - 1) * stride < c.gpus_per_node;
  return one_node ? Link{c.intra_node_bytes_per_s(), c.intra_node_latency_s} : Link{c.inter_node_bytes_per_s(), c.inter_node_latency_s};
}

// The same group as NCCL sees it: the nodes it spans (as many of its ranks to a
// node as `stride` apart fit in one) and the links inside and between them.
CollectiveGroup collective_group(const ClusterSpec& c, int64_t size, int64_t stride) {
  const int64_t per_node = std::clamp<int64_t>(c.gpus_per_node / std::max<int64_t>(stride, 1), 1, std::max<int64_t>(size, 1));
  const int64_t nodes = (size + per_node - 1) / per_node;
  return CollectiveGroup{size, nodes, c.intra_node_bytes_per_s(), c.inter_node_bytes_per_s(), c.gpu.nvlink_gbps > 0};
}

// The forward GEMMs of one block that torchtitan's op-level policy runs again
// in backward, on one tp rank's share of their weights.
double op_policy_gemm_seconds(const ModelConfig& config, int64_t tokens, int64_t tp, const KernelRoofs& roofs) {
  double seconds = 0;
  for (const OpPolicyLinear& linear : op_policy_linears(config)) {
    if (!linear.recomputed) continue;
    const auto out = static_cast<double>(linear.out_features) / static_cast<double>(linear.row_parallel ? 1 : tp);
    const auto in = static_cast<double>(linear.in_features) / static_cast<double>(linear.row_parallel ? tp : 1);
    seconds += gemm_seconds({static_cast<double>(tokens), out, in}, roofs);
  }
  return seconds;
}

// One micro-batch's element-wise bytes. Inside the blocks only where each
// kernel's traffic is read from the runtime: the models run op by op
// (eager_elementwise.h: torchtitan's Llama block, Hugging Face's models under
// the hf profiles) and Megatron-LM's fused kernels (megatron_elementwise.h); a
// fusing runtime's are what its blocks keep. Outside the blocks: those runs'
// embedding, final norm and loss, or Megatron-Core's vocabulary-parallel
// cross-entropy on the last stage (vocab_parallel_loss.h) over its share of the
// vocabulary, padded to a multiple of tp as the head is (gemm_model.cpp), or
// torchtitan's eager loss beside its compiled blocks (--compile-model-only);
// nothing for the others.
// Where the attention core is unfused, its own element-wise work (included in
// the block's) is what selective recompute runs again.
struct ElementwiseWork {
  std::optional<ElementwiseBytes> per_kernel_block;
  OutsideBlocksBytes outside;
  std::optional<ElementwiseBytes> unfused_core;
};

ElementwiseWork elementwise_work(const ModelConfig& config, const EstimateRequest& r, double tokens) {
  const TrainingOptions& t = r.training;
  const int64_t tp = r.layout.tp;
  const auto scaled = [tokens](ElementwiseBytes per_token) { return ElementwiseBytes{per_token.forward * tokens, per_token.backward * tokens}; };
  const auto per_kernel = [&](ElementwiseBytes block, OutsideBlocksBytes outside) {
    return ElementwiseWork{scaled(block), {scaled(outside.first_stage), scaled(outside.last_stage)}, std::nullopt};
  };
  // Hugging Face's eager attention adds its element-wise work over the scores.
  const auto hf_op_by_op = [&](ElementwiseBytes block, OutsideBlocksBytes outside) {
    if (t.activation_profile != ActivationProfile::hf_eager) return per_kernel(block, outside);
    const ElementwiseBytes scores = hf_eager_attention_score_bytes(config, t.precision, tp, t.seq_len);
    ElementwiseWork work = per_kernel(ElementwiseBytes{block.forward + scores.forward, block.backward + scores.backward}, outside);
    work.unfused_core = scaled(scores);
    return work;
  };
  switch (elementwise_execution(config, r.plugin.runtime, t)) {
    case ElementwiseExecution::torchtitan_llama_eager: {
      const int64_t d = compute_bytes(t.precision);
      const bool fused_norm = r.plugin.fused_rmsnorm;
      return per_kernel(torchtitan_eager_block_bytes(config, d, fused_norm), torchtitan_eager_outside_bytes(config, d, fused_norm));
    }
    case ElementwiseExecution::hf_gpt2_eager:
      return hf_op_by_op(hf_gpt2_eager_block_bytes(config, t.activation_profile, t.precision, tp),
                         hf_gpt2_eager_outside_bytes(config, t.activation_profile, t.precision, tp, t.transformers_version));
    case ElementwiseExecution::hf_llama_eager:
      return hf_op_by_op(hf_llama_eager_block_bytes(config, t.activation_profile, t.precision, tp),
                         hf_llama_eager_outside_bytes(config, t.activation_profile, t.precision, tp, t.transformers_version));
    case ElementwiseExecution::megatron_lm_kernels: {
      const int64_t d = compute_bytes(t.precision);
      const bool sp = r.layout.sequence_parallel;
      ElementwiseWork work = per_kernel(megatron_lm_block_bytes(config, d, tp, sp, t.seq_len),
                                        megatron_lm_outside_bytes(config, d, tp, sp, r.plugin.cross_entropy_loss_fusion));
      work.unfused_core = scaled(megatron_lm_core_bytes(config, d, tp, t.seq_len));
      return work;
    }
    case ElementwiseExecution::fused: break;
  }
  if (r.plugin.compile_model_only) {  // torchtitan's blocks compiled, its loss op by op on the upcast logits
    return ElementwiseWork{std::nullopt, {{}, scaled(upcast_cross_entropy_bytes(config.vocab_size, compute_bytes(t.precision)))}, std::nullopt};
  }
  if (!runs_vocab_parallel_cross_entropy(config, r.plugin.runtime, t)) return {};
  const ElementwiseBytes loss = vocab_parallel_cross_entropy_bytes(config, tp, compute_bytes(t.precision), r.plugin.cross_entropy_loss_fusion);
  return ElementwiseWork{std::nullopt, {{}, scaled(loss)}, std::nullopt};
}

// One micro-batch's passes on one stage, seconds.
struct StageCost {
  double forward_compute = 0;
  double backward_compute = 0;  // 2 × forward
  double recompute = 0;
  double forward_comm = 0;      // exposed tensor-parallel / ZeRO-3 communication in forward, pipeline sends that hold the stage
  double backward_comm = 0;
  double forward_offload = 0;   // exposed PCIe copies: Gemini's host parameter chunks, FSDP's offloaded shards
  double backward_offload = 0;
  double offload() const { return forward_offload + backward_offload; }
  double forward_s() const { return forward_compute + forward_comm + forward_offload; }
  double backward_s() const { return backward_compute + recompute + backward_comm + backward_offload; }
};

struct Context {
  const Model& model;
  const ClusterSpec& cluster;
  const EstimateRequest& request;
  const MemoryEstimate& estimate;
  const SimulationSettings& settings;
  KernelRoofs roofs;                 // bf16's under fp8: attention, the head, element-wise work, MFU
  const std::vector<PassSeconds>& matmuls;  // one micro-batch's GEMMs per layer (gemm_model.h), FP8 blocks under fp8
  // What one block keeps for backward of a micro-batch without recompute, and of that what the request's recompute writes again (activations.h).
  int64_t block_stash_bytes, recomputed_block_bytes;
  double op_policy_gemm_seconds;  // one block's linears that torchtitan's op-level policy runs again, one micro-batch
  ElementwiseWork elementwise;  // one micro-batch's element-wise bytes run op by op, and outside the blocks
  double userbuffer_sm_margin_seconds;  // --tp-comm-overlap: what one block's forward loses to the reduce-scatter's SMs (gemm_model.h)
  double pipeline_send_hold_s;  // what a sending pass holds its stage for (simulate.h, pipeline_send_hold_seconds)
  // A rank's tokens of one micro-batch: its 1/cp of each sequence.
  double tokens_per_micro_batch() const { return static_cast<double>(request.training.micro_batch_size * request.local_seq_len()); }
  double dtype_bytes() const { return static_cast<double>(compute_bytes(request.training.precision)); }
  // Bytes per gradient element on the wire: Megatron-Core reduces its main-gradient
  // buffer (fp32 under bf16 unless --grad-reduce-in-bf16), torchtitan's FSDP2
  // reduces in fp32 (model_states_megatron.cpp, model_states_fsdp2.cpp); the others
  // in the compute dtype.
  double gradient_wire_bytes() const {
    if (request.plugin.runtime == Runtime::megatron) return static_cast<double>(megatron_main_grad_bytes(request.plugin, request.training.precision));
    return request.plugin.runtime == Runtime::torchtitan ? 4.0 : dtype_bytes();
  }
};

// Time a collective adds when it runs alongside `compute` seconds of work: what
// sticks out, plus the overlap cost of the part that hides.
double overlapped(double comm, double compute, double overlap_cost) {
  const double exposed = std::max(0.0, comm - compute);
  return exposed + overlap_cost * (comm - exposed);
}

// DeepSpeed ZeRO-3 is low_level_zero at stage 3 (--runtime deepspeed).
bool is_zero3(const PluginOptions& p) { return p.kind == PluginKind::torch_fsdp || p.kind == PluginKind::gemini || p.effective_zero_stage() == 3; }

// The collectives of sharded model states. The shard group is one replica's
// shard_ranks() data ranks, tp apart (consecutive in cp, then dp); under
// hybrid sharding the R replicas of a shard are shard_ranks() · tp apart.
// Gathers run in the shard group; a gradient is reduce-scattered there and its
// shard then all-reduced across the replicas (FSDP HYBRID_SHARD's
// post-backward, MiCS's and Megatron's instance-wide all-reduce).
struct ShardGroups {
  CollectiveGroup shard, replica;
  double gather_s(double bytes) const { return collective_seconds(Collective::all_gather, bytes, shard); }
  double reduce_s(double bytes) const {
    return collective_seconds(Collective::reduce_scatter, bytes, shard) +
           collective_seconds(Collective::all_reduce, bytes / static_cast<double>(shard.ranks), replica);
  }
};

ShardGroups shard_groups(const Context& c) {
  const auto& l = c.request.layout;
  const int64_t shard = l.shard_ranks();
  return ShardGroups{collective_group(c.cluster, shard, l.tp), collective_group(c.cluster, l.dp_replicate, l.tp * shard)};
}

// ZeRO-3 gathers the parameters in forward and backward and reduce-scatters the
// gradients in backward, every micro-batch; prefetching hides what compute
// covers. Gemini moves whole chunks, and backward finds those that
// shard_param_frac kept gathered (the engine's gathering replayed, gemini_gathering.h).
double pcie_seconds(const Context& c, double bytes) { return bytes / (c.cluster.gpu.pcie_gbps * 1e9); }

// CPU Adam over `params` elements on this GPU's share of the node's cores.
double cpu_optimizer_seconds(const Context& c, double params) {
  return params / (c.cluster.cpu_adam_params_per_s_per_node / static_cast<double>(c.cluster.gpus_per_node));
}

// FSDP's CPU offload (fsdp_offload.h): each unit's fp32 shard up before its
// all-gather, its reduced fp32 gradient shard down after its reduce-scatter.
// FSDP issues them on its side streams around the collectives they feed, so
// they hide under the pass's compute as the collectives do.
void add_fsdp_offload_copies(const Context& c, const StageShape& s, StageCost& cost) {
  const PluginOptions& p = c.request.plugin;
  if (!p.fsdp_offload()) return;
  const double shard = static_cast<double>(s.params) / static_cast<double>(c.request.layout.shard_ranks());
  const FsdpOffloadTraffic traffic = fsdp_offload_traffic(shard, p.fsdp_strategy);
  cost.forward_offload += overlapped(pcie_seconds(c, traffic.forward_up_bytes), cost.forward_compute, c.settings.overlap_cost);
  cost.backward_offload += overlapped(pcie_seconds(c, traffic.backward_up_bytes + traffic.backward_down_bytes), cost.backward_compute + cost.recompute,
                                      c.settings.overlap_cost);
}

// DeepSpeed's offload_param: every gather first brings the rank's 16-bit
// partitions up from the host (partition_parameters.py at edaa722,
// all_gather_coalesced: ds_tensor.to(device) into the all-gather's input), in
// forward and again in backward, ahead of use as the gathers are.
void add_deepspeed_partition_fetches(const Context& c, const StageShape& s, StageCost& cost) {
  if (!c.request.plugin.deepspeed.offload_param) return;
  const double bytes = static_cast<double>(s.params) / static_cast<double>(c.request.layout.shard_ranks()) * c.dtype_bytes();
  cost.forward_offload += overlapped(pcie_seconds(c, bytes), cost.forward_compute, c.settings.overlap_cost);
  cost.backward_offload += overlapped(pcie_seconds(c, bytes), cost.backward_compute + cost.recompute, c.settings.overlap_cost);
}

void add_zero3_communication(const Context& c, const StageShape& s, StageCost& cost) {
  const auto& l = c.request.layout;
  if (!is_zero3(c.request.plugin) || l.data_ranks() == 1) return;
  const ShardGroups groups = shard_groups(c);
  double forward_elements = static_cast<double>(s.params), backward_elements = forward_elements, reduced_elements = forward_elements;
  if (c.estimate.gemini) {
    const int64_t k = c.request.training.num_micro_batches;
    const GeminiStepReplay& step = c.estimate.gemini->step;
    forward_elements = static_cast<double>(step.forward_gathered_elements);
    backward_elements = static_cast<double>(step.backward_gathered_elements);
    reduced_elements = static_cast<double>(step.reduced_elements) / static_cast<double>(k);
  }
  const double gather = groups.gather_s(forward_elements * c.dtype_bytes());
  const double backward_gather = groups.gather_s(backward_elements * c.dtype_bytes());
  const double scatter = groups.reduce_s(reduced_elements * c.gradient_wire_bytes());
  const double first_unit = gather / static_cast<double>(std::max(1, s.num_layers));  // nothing to overlap with yet
  cost.forward_comm += overlapped(gather, cost.forward_compute, c.settings.overlap_cost) + first_unit;
  cost.backward_comm += overlapped(backward_gather + scatter, cost.backward_compute + cost.recompute, c.settings.overlap_cost);
}

// FSDP2 (torchtitan's) copies every gathered parameter out of the all-gather's
// flat output into its own unsharded tensor, on the compute stream once the
// all-gather is done (pytorch/pytorch@01d66d21f38a04729a87a5840f405ca1b7acf856,
// torch/distributed/_composable/fsdp/_fsdp_collectives.py,
// foreach_all_gather_copy_out: torch.split_with_sizes_copy): a read and a write
// of every element, in forward and again in backward, for each gather that
// add_zero3_communication charges. Its other copies run on its side streams
// beside the passes: the rank's shard into the all-gather's input (1/d of the
// elements) and the gradients cast into the fp32 reduce-scatter input
// (foreach_reduce_scatter_copy_in). FSDP1's flat parameter is gathered in place.
void add_fsdp2_copy_out(const Context& c, const StageShape& s, StageCost& cost) {
  const PluginOptions& p = c.request.plugin;
  if (p.kind != PluginKind::torch_fsdp || p.runtime != Runtime::torchtitan || c.request.layout.shard_ranks() == 1) return;
  const double copy = 2 * static_cast<double>(s.params) * c.dtype_bytes() / c.roofs.hbm_bytes_per_s;
  cost.forward_compute += copy;
  cost.backward_compute += copy;
}

// ZeRO-2 keeps only its gradient shard, so every micro-batch's backward
// reduce-scatters its gradients (overlapped with that backward); ZeRO-1 and DDP
// accumulate whole gradients and reduce once per step (after_pipeline).
void add_zero2_communication(const Context& c, const StageShape& s, StageCost& cost) {
  const auto& l = c.request.layout;
  const auto& p = c.request.plugin;
  const bool zero2 = (p.kind == PluginKind::low_level_zero || p.kind == PluginKind::hybrid_parallel) && p.effective_zero_stage() == 2;
  if (!zero2 || l.data_ranks() == 1) return;
  const double scatter = shard_groups(c).reduce_s(static_cast<double>(s.params) * c.dtype_bytes());
  cost.backward_comm += overlapped(scatter, cost.backward_compute + cost.recompute, c.settings.overlap_cost);
}

// Ring attention over the cp ranks (Transformer Engine's AttnFuncWithCPAndKVP2P,
// which Megatron-Core's context parallelism runs; torchtitan's and ColossalAI's
// ring attention likewise): per layer cp − 1 steps, each passing this rank's
// keys and values (b · s/cp · kv_width/tp elements each) to the next rank
// while the attention of the chunk at hand runs on another stream. Forward the
// keys and values go round as an all-gather's ring does; backward they go round
// again and their gradients accumulate round the ring as a reduce-scatter's do;
// where recompute reruns the attention core, its forward ring runs again in
// backward too (context_parallel.h, ring_sends). The ring hides behind the
// attention core (`attention`, per layer; in backward also its rerun forward).
void add_context_parallel_communication(const Context& c, const StageShape& s, const PassSeconds& attention, StageCost& cost) {
  const auto& l = c.request.layout;
  if (l.cp == 1 || s.num_layers == 0) return;
  const CollectiveGroup ring = collective_group(c.cluster, l.cp, l.tp);
  const double kv_bytes =
      static_cast<double>(ring_block_elements(c.request.training.micro_batch_size, c.request.local_seq_len(), c.model.config.kv_width(), l.tp)) *
      c.dtype_bytes();
  const double ring_bytes = kv_bytes * static_cast<double>(l.cp);  // the gathered buffer: every rank's chunk
  const double layers = static_cast<double>(s.num_layers);
  const double forward = layers * collective_seconds(Collective::all_gather, ring_bytes, ring);
  // The share of the blocks whose attention core runs again: all under selective, those recomputed whole under full.
  const TrainingOptions& t = c.request.training;
  const double rerun = !recompute_reruns_ring(t.recompute) ? 0.0
                       : t.recompute == RecomputeMode::full ? static_cast<double>(blocks_recomputed_whole(t, s.chunks)) / layers
                                                            : 1.0;
  const double backward = rerun * forward + layers * (collective_seconds(Collective::all_gather, ring_bytes, ring) +
                                                      collective_seconds(Collective::reduce_scatter, ring_bytes, ring));
  cost.forward_comm += overlapped(forward, layers * attention.forward, c.settings.overlap_cost);
  cost.backward_comm += overlapped(backward, layers * (attention.backward + rerun * attention.forward), c.settings.overlap_cost);
}

// A tensor-parallel group's calls, each of its share of the bytes.
double tp_calls_s(const TpCalls& calls, const CollectiveGroup& group) {
  const auto each = [&](const CollectiveCalls& k, Collective collective) {
    const auto n = static_cast<double>(k.calls);
    return k.calls == 0 ? 0.0 : n * collective_seconds(collective, static_cast<double>(k.bytes) / n, group);
  };
  return each(calls.all_reduce, Collective::all_reduce) + each(calls.reduce_scatter, Collective::reduce_scatter) +
         each(calls.all_gather, Collective::all_gather);
}

// Transformer Engine's amax reductions under fp8 (fp8.h): one per model chunk in
// forward and one in backward, each a few bytes over the tp × dp × cp group, all
// latency. The compute stream waits for them (async_op=False), so none is hidden.
void add_fp8_amax_reductions(const Context& c, const StageShape& s, StageCost& cost) {
  const auto& l = c.request.layout;
  if (!is_fp8(c.request.training.precision) || l.tp * l.data_ranks() == 1) return;
  const CollectiveGroup group = collective_group(c.cluster, l.tp * l.data_ranks(), 1);  // ranks ordered tp-cp-dp-pp: contiguous
  for (const StageLayers& chunk : s.chunks) {
    cost.forward_comm += collective_seconds(Collective::all_reduce, static_cast<double>(fp8_amax_reduction_bytes(chunk.num_layers, true)), group);
    cost.backward_comm += collective_seconds(Collective::all_reduce, static_cast<double>(fp8_amax_reduction_bytes(chunk.num_layers, false)), group);
  }
}

StageCost stage_cost(const Context& c, const StageShape& s) {
  const auto& t = c.request.training;
  const auto& l = c.request.layout;
  const double tokens = c.tokens_per_micro_batch();
  // Each cp rank runs 1/cp of every sequence's causal attention (the load-balanced
  // chunks of Transformer Engine's context parallelism), queries against all keys.
  const double cp = static_cast<double>(l.cp);
  const PassSeconds full = attention_core_seconds(c.model.config, fused_attention(t.activation_profile), t.micro_batch_size, t.seq_len, l.tp, c.roofs);
  const PassSeconds attention{full.forward / cp, full.backward / cp};
  StageCost cost;
  double block_forward = 0;  // the blocks' GEMMs, what full recompute runs again
  for (const StageLayers& chunk : s.chunks) {
    for (int i = 0; i < chunk.num_layers; ++i) {
      const PassSeconds& block = c.matmuls[static_cast<size_t>(chunk.first_layer + i + 1)];
      block_forward += block.forward;
      cost.forward_compute += block.forward + attention.forward;
      cost.backward_compute += block.backward + attention.backward;
    }
  }
  if (s.last) {
    // OPT's projections and the head run on the last stage.
    for (const PassSeconds& outside : {c.matmuls.front(), c.matmuls.back()}) {
      cost.forward_compute += outside.forward;
      cost.backward_compute += outside.backward;
    }
  }
  const double attention_forward = attention.forward * s.num_layers;
  const double layers = static_cast<double>(s.num_layers);
  block_forward += c.userbuffer_sm_margin_seconds * layers;
  cost.forward_compute += c.userbuffer_sm_margin_seconds * layers;
  // Element-wise work (norms, activations, softmax, dropout) is memory-bound. Where
  // the runtime fuses it, each tensor a block keeps for backward is written once in
  // forward and read once in backward, where its gradient is written too (a roofline
  // lower bound); where its kernels are read (op by op, or Megatron-LM's fused
  // kernels), every kernel's reads and writes.
  const double hbm = c.roofs.hbm_bytes_per_s;
  const double kept = static_cast<double>(c.block_stash_bytes) * layers;
  const double recomputed = static_cast<double>(c.recomputed_block_bytes) * layers;
  const std::optional<ElementwiseBytes>& per_kernel = c.elementwise.per_kernel_block;
  const double forward_elementwise = per_kernel ? per_kernel->forward * layers : kept;
  const double backward_elementwise = per_kernel ? per_kernel->backward * layers : 2 * kept;
  cost.forward_compute += forward_elementwise / hbm;
  cost.backward_compute += backward_elementwise / hbm;
  const OutsideBlocksBytes& outside = c.elementwise.outside;
  for (const auto& [holds, bytes] : {std::pair{s.first, outside.first_stage}, std::pair{s.last, outside.last_stage}}) {
    if (!holds) continue;
    cost.forward_compute += bytes.forward / hbm;
    cost.backward_compute += bytes.backward / hbm;
  }
  if (is_fp8(t.precision)) {
    // Transformer Engine's casts of GEMM operands to FP8 (fp8.h), memory-bound like the rest.
    const Fp8Casts casts = fp8_cast_elements_per_token(c.model.config);
    const double per_element = tokens * static_cast<double>(kFp8CastBytesPerElement * s.num_layers) / static_cast<double>(l.tp) / hbm;
    cost.forward_compute += static_cast<double>(casts.forward) * per_element;
    cost.backward_compute += static_cast<double>(casts.backward) * per_element;
  }
  // Each micro-batch's gradients added into the step's (gradient_accumulation.h).
  cost.backward_compute +=
      gradient_accumulation_bytes(gradient_accumulation(c.request.plugin, t), s.params, s.non_matmul_params, t.num_micro_batches) / hbm;
  add_fsdp2_copy_out(c, s, cost);
  if (t.recompute == RecomputeMode::selective) {
    // The core's forward again: its kernels where they are read, else the tensors it keeps written again.
    const std::optional<ElementwiseBytes>& core = c.elementwise.unfused_core;
    cost.recompute = attention_forward + (core ? core->forward * layers : recomputed) / hbm;
  }
  if (t.recompute == RecomputeMode::full) {
    // The blocks recomputed whole run their forward again (recompute_blocks.h).
    const double whole = static_cast<double>(blocks_recomputed_whole(t, s.chunks)) / std::max(1.0, layers);
    cost.recompute = whole * (block_forward + attention_forward + forward_elementwise / hbm);
  }
  if (t.recompute == RecomputeMode::op_selective) {
    // Every element-wise op runs again; fused, that writes the tensors the policy did not keep.
    cost.recompute = c.op_policy_gemm_seconds * layers + (per_kernel ? forward_elementwise : recomputed) / hbm;
  }
  if (l.tp > 1) {
    // Megatron-LM's collectives, call by call (tp_traffic.h: what the engine does).
    const CollectiveGroup group = collective_group(c.cluster, l.tp, 1);
    const TpMicroBatchTraffic traffic = tp_micro_batch_traffic(c.model.config, TpStage{s.num_layers, s.first, s.last, blocks_recomputed_whole(t, s.chunks)}, t.micro_batch_size, c.request.local_seq_len(),
                                                               l.sequence_parallel, t.recompute, static_cast<int64_t>(c.dtype_bytes()));
    cost.forward_comm = tp_calls_s(traffic.forward, group);
    cost.backward_comm = tp_calls_s(traffic.backward, group);
    if (c.request.plugin.tp_comm_overlap) {
      // Megatron-Core's userbuffer overlap and async TP pipeline each call's chunks
      // with the GEMM beside it: what the pass's compute covers hides.
      cost.forward_comm = overlapped(cost.forward_comm, cost.forward_compute, c.settings.overlap_cost);
      cost.backward_comm = overlapped(cost.backward_comm, cost.backward_compute + cost.recompute, c.settings.overlap_cost);
    }
  }
  if (c.pipeline_send_hold_s > 0) {
    // Each chunk's pass that sends holds the stage for it: every forward but the
    // last virtual stage's, every backward but the first's.
    const auto chunks = static_cast<double>(s.chunks.size());
    cost.forward_comm += c.pipeline_send_hold_s * (chunks - (s.last ? 1 : 0));
    cost.backward_comm += c.pipeline_send_hold_s * (chunks - (s.first ? 1 : 0));
  }
  add_context_parallel_communication(c, s, attention, cost);
  add_fp8_amax_reductions(c, s, cost);
  add_zero3_communication(c, s, cost);
  add_zero2_communication(c, s, cost);
  if (c.estimate.gemini && c.estimate.gemini->offload_param_frac > 0) {
    const double host_params = static_cast<double>(c.estimate.gemini->padded_elements()) * c.estimate.gemini->offload_param_frac /
                               static_cast<double>(l.shard_ranks());
    // Fetched for forward and again for backward.
    cost.forward_offload = cost.backward_offload = pcie_seconds(c, host_params * c.dtype_bytes());
  }
  add_fsdp_offload_copies(c, s, cost);
  add_deepspeed_partition_fetches(c, s, cost);
  return cost;
}

// Each model chunk's share of its stage's time: its blocks' forward FLOPs, the
// head's going to the last stage's last chunk (where the head runs).
std::vector<double> chunk_shares(const Context& c, const StageShape& s) {
  const int64_t seq = c.request.training.seq_len;
  std::vector<double> flops;
  double total = 0;
  for (const StageLayers& chunk : s.chunks) {
    double f = 0;
    for (int i = 0; i < chunk.num_layers; ++i) f += block_forward_flops_per_token(c.model, chunk.first_layer + i, seq);
    flops.push_back(f);
  }
  if (s.last) flops.back() += outside_blocks_forward_flops_per_token(c.model);
  for (double f : flops) total += f;
  for (double& f : flops) f = total > 0 ? f / total : 1.0 / static_cast<double>(flops.size());
  return flops;
}

struct PipelineRun {
  double makespan = 0;
};

// When one pass ran, for its trace events.
struct PassTiming {
  double received = -1;  // when its input left the neighbouring stage; -1 where nothing was sent
  double p2p_s = 0;
  double start = 0, duration = 0;
  double exposed_comm = 0;  // the exposed communication in its duration
};

// What a pass's exposed communication is, for its trace event: tensor-parallel
// calls where there are any, else context-parallel ones, ZeRO-3's gathers and
// scatters, ZeRO-2's scatters, the pipeline sends that hold the stage, or FP8's
// amax reductions.
std::string exposed_comm_kind(const Context& c) {
  const auto& l = c.request.layout;
  const PluginOptions& p = c.request.plugin;
  if (l.tp > 1) return "tensor-parallel ";
  if (l.cp > 1) return "context-parallel ";
  if (is_zero3(p)) return "ZeRO-3 ";
  if (p.effective_zero_stage() == 2) return "ZeRO-2 ";
  if (c.pipeline_send_hold_s > 0) return "pipeline send ";
  return is_fp8(c.request.training.precision) ? "FP8 amax reduction " : "data-parallel ";
}

// A pass's trace events on stage k's lanes: the receive of its input, the pass,
// and its exposed communication (`kind`) on the communication lane at the
// pass's end: what the compute lane waited for.
void add_pass_events(std::vector<TraceEvent>& events, const std::string& kind, const PipelineOp& op, int64_t k, int64_t chunks, const PassTiming& t) {
  std::string name = op.pass == PipelinePass::forward ? "F" : "B";
  name += std::to_string(op.micro_batch);
  if (chunks > 1) name += "." + std::to_string(op.chunk);
  const int compute_lane = static_cast<int>(2 * k), comm_lane = compute_lane + 1;
  if (t.received >= 0) events.push_back({"recv " + name, "communication", comm_lane, t.received, t.p2p_s});
  events.push_back({name, op.pass == PipelinePass::forward ? "forward" : "backward", compute_lane, t.start, t.duration, op.micro_batch, op.chunk});
  if (t.exposed_comm > 0) {
    events.push_back({kind + name, "communication", comm_lane, t.start + t.duration - t.exposed_comm, t.exposed_comm});
  }
}

// Per virtual stage (chunk j of stage k is virtual stage j·pp + k), a pass's
// seconds and the exposed communication in them: its stage's pass time by its
// chunk's share.
struct ChunkPassSeconds {
  double forward, backward, forward_comm, backward_comm;
};

std::vector<ChunkPassSeconds> chunk_pass_seconds(const Context& c, const std::vector<StageShape>& shapes, const std::vector<StageCost>& costs) {
  const int64_t pp = static_cast<int64_t>(costs.size());
  const int64_t chunks = c.request.plugin.model_chunks();
  std::vector<ChunkPassSeconds> seconds(static_cast<size_t>(pp * chunks));
  for (int64_t k = 0; k < pp; ++k) {
    const StageCost& cost = costs[static_cast<size_t>(k)];
    const std::vector<double> shares = chunk_shares(c, shapes[static_cast<size_t>(k)]);
    for (int64_t j = 0; j < chunks; ++j) {
      const double share = shares[static_cast<size_t>(j)];
      seconds[static_cast<size_t>(j * pp + k)] = {cost.forward_s() * share, cost.backward_s() * share, cost.forward_comm * share, cost.backward_comm * share};
    }
  }
  return seconds;
}

// Runs the schedule event by event: a pass starts when its stage is free and its
// input has arrived from the neighbouring stage (plus the send time). Under the
// interleaved schedule the neighbours are virtual stages, and a chunk's pass
// takes its share of the stage's time by blocks (`seconds`).
PipelineRun run_pipeline(const Context& c, const std::vector<ChunkPassSeconds>& seconds, double p2p_s, std::vector<TraceEvent>* events) {
  const auto& plugin = c.request.plugin;
  const int64_t chunks = plugin.model_chunks();
  const int64_t virtual_stages = static_cast<int64_t>(seconds.size());
  const int64_t pp = virtual_stages / chunks;
  const int64_t m = c.request.training.num_micro_batches;
  const std::string comm_kind = events ? exposed_comm_kind(c) : std::string();
  // When each virtual stage's pass of each micro-batch ends (index vs · m + i); -1 until it has run.
  std::vector<double> forward_end(static_cast<size_t>(virtual_stages * m), -1), backward_end = forward_end;
  std::vector<StageScheduleCursor> cursors;
  cursors.reserve(static_cast<size_t>(pp));
  for (int64_t k = 0; k < pp; ++k) cursors.emplace_back(plugin.pp_schedule, pp, k, m, chunks);
  std::vector<double> free_at(static_cast<size_t>(pp), 0);
  PipelineRun run;
  size_t remaining = static_cast<size_t>(pp * 2 * m * chunks);
  if (events) events->reserve(events->size() + 3 * remaining);  // at most three events a pass (add_pass_events)
  while (remaining > 0) {
    const size_t before = remaining;
    for (int64_t k = 0; k < pp; ++k) {
      const auto ku = static_cast<size_t>(k);
      double free = free_at[ku];  // when the stage's last pass ended, kept in a local across its passes
      for (StageScheduleCursor& cursor = cursors[ku]; !cursor.done(); cursor.advance()) {
        const PipelineOp op = cursor.op();
        const int64_t vs = op.chunk * pp + k;
        const bool forward = op.pass == PipelinePass::forward;
        const bool has_input = forward ? vs > 0 : vs + 1 < virtual_stages;
        double sent = 0;  // when the input left the neighbouring stage
        if (has_input) sent = forward ? forward_end[static_cast<size_t>((vs - 1) * m + op.micro_batch)] : backward_end[static_cast<size_t>((vs + 1) * m + op.micro_batch)];
        if (sent < 0) break;  // the neighbour has not produced this input yet
        // The activation (forward) or its gradient (backward) arrives from the neighbouring stage.
        const double ready = has_input ? sent + p2p_s : 0;
        const ChunkPassSeconds& pass = seconds[static_cast<size_t>(vs)];
        const double start = std::max(free, ready);
        const double duration = forward ? pass.forward : pass.backward;
        free = start + duration;
        (forward ? forward_end : backward_end)[static_cast<size_t>(vs * m + op.micro_batch)] = free;
        if (events) {
          const PassTiming timing{has_input && p2p_s > 0 ? sent : -1, p2p_s, start, duration, forward ? pass.forward_comm : pass.backward_comm};
          add_pass_events(*events, comm_kind, op, k, chunks, timing);
        }
        --remaining;
      }
      free_at[ku] = free;
      run.makespan = std::max(run.makespan, free);  // a stage's passes end in order: its last is its latest
    }
    // Every schedule of stage_schedule() makes progress each sweep; a table
    // that cannot would otherwise spin forever.
    TESSERA_CHECK(remaining < before, "pipeline schedule deadlocks");
  }
  return run;
}

struct AfterPipeline {
  double communication = 0;
  double offload = 0;
  double optimizer = 0;
};

// DeepSpeed's pipeline engine after its schedule (deepspeed_pipeline.h), none of
// it under compute. bf16: the fp32 gradient buffer all-reduced in bf16, then
// the BF16_Optimizer's step and the bf16 partitions' all-gather. fp16: every
// gradient through DeepSpeedZeroOptimizer's bucket and reduced to the rank
// that owns it, the partition's step, the fp16 partitions' all-gather.
AfterPipeline deepspeed_pipeline_step(const Context& c, double params) {
  const auto& l = c.request.layout;
  const double shard = params / static_cast<double>(l.shard_ranks());
  const ShardGroups groups = shard_groups(c);
  const bool fp16 = c.request.training.precision == Precision::fp16;
  AfterPipeline out;
  if (l.data_ranks() > 1) {
    const double reduce = fp16 ? groups.reduce_s(params * c.dtype_bytes())
                               : collective_seconds(Collective::all_reduce, params * kDeepSpeedReduceWireBytes, collective_group(c.cluster, l.data_ranks(), l.tp));
    out.communication = reduce + groups.gather_s(params * kDeepSpeedGatherWireBytes);
  }
  const double whole_gradients = fp16 ? kDeepSpeedZeroBucketBytes : kDeepSpeedGradReduceCopyBytes + kDeepSpeedNormAndClearBytes;
  const double bytes = params * whole_gradients + shard * optimizer_step_bytes_per_param(c.request.plugin, c.request.training);
  out.optimizer = bytes / c.roofs.hbm_bytes_per_s;
  return out;
}

// A tied embedding's gradient summed between the first and the last stage after
// the schedule, before anything else reduces (Megatron-LM@79a3bb6b
// megatron/optimizer/optimizer.py allreduce_word_embedding_grads; DeepSpeed
// pipe/engine.py at 36ad3119d _exec_reduce_tied_grads, in fp32 under the
// BF16_Optimizer; Tessera's engine, cuda/gpt_training.h): what it delays the step by.
double tied_embedding_sum_seconds(const Context& c) {
  const auto& l = c.request.layout;
  const int64_t tied = c.model.tied_head.per_tp_rank(l.tp);
  if (l.pp <= 1 || tied == 0) return 0;
  const bool fp32_buffer = c.request.plugin.deepspeed_pipeline() && c.request.training.precision == Precision::bf16;  // the BF16_Optimizer's
  const double wire = fp32_buffer ? 4 : c.gradient_wire_bytes();
  const CollectiveGroup ends = collective_group(c.cluster, 2, (l.pp - 1) * l.tp * l.data_ranks());
  return collective_seconds(Collective::all_reduce, static_cast<double>(tied) * wire, ends);
}

// What the distributed optimizer's all-gather of the updated parameters moves for
// one rank of stage `s`: every parameter in the compute dtype, except that under
// --fp8-param-gather the blocks' GEMM weights travel as their FP8 bytes (fp8.h).
double parameter_gather_bytes(const Context& c, const StageShape& s) {
  const double params = static_cast<double>(s.params);
  if (!c.request.plugin.fp8_param_gather) return params * c.dtype_bytes();
  const auto fp8 = static_cast<double>(fp8_weight_elements(c.model, s.chunks, c.request.layout.tp));
  return (params - fp8) * c.dtype_bytes() + fp8;
}

// Data-parallel gradient reduction, offloaded optimizer and the optimizer step,
// charged for the busiest stage (the one whose compute sets the step's length).
AfterPipeline data_parallel_step(const Context& c, const StageShape& s, const StageCost& cost) {
  const auto& l = c.request.layout;
  const auto& p = c.request.plugin;
  const double params = static_cast<double>(s.params);
  if (p.deepspeed_pipeline()) return deepspeed_pipeline_step(c, params);
  const double shard = params / static_cast<double>(l.shard_ranks());
  const CollectiveGroup dp = collective_group(c.cluster, l.data_ranks(), l.tp);
  const ShardGroups groups = shard_groups(c);
  AfterPipeline out;
  const int stage = p.effective_zero_stage();
  const bool replicated = p.kind == PluginKind::torch_ddp || (p.kind == PluginKind::hybrid_parallel && stage == 0);
  double on_gpu = params;  // parameters the GPU optimizer updates
  double offloaded = 0;    // parameters the CPU optimizer updates
  if (l.data_ranks() > 1 && !is_zero3(p) && stage != 2) {
    const double grad_bytes = params * c.gradient_wire_bytes();
    const double reduce = replicated ? collective_seconds(Collective::all_reduce, grad_bytes, dp) : groups.reduce_s(grad_bytes);
    // Overlapped with the last backward, except the last bucket; all of it after
    // the backward where the runtime reduces then (grad_reduce_after_backward).
    const double bucket = replicated ? static_cast<double>(p.bucket_bytes) : static_cast<double>(p.reduce_bucket_numel) * c.dtype_bytes();
    const double last_bucket = reduce * std::min(1.0, bucket / grad_bytes);
    out.communication =
        p.grad_reduce_after_backward ? reduce : last_bucket + overlapped(reduce - last_bucket, cost.backward_s(), c.settings.overlap_cost);
    if (!replicated) {
      // The updated parameters' all-gather; with --overlap-param-gather it runs under
      // the next step's first forward, bucket by bucket (Megatron-Core's
      // distributed optimizer), and only what that forward does not cover shows.
      const double gather = groups.gather_s(parameter_gather_bytes(c, s));
      out.communication += p.overlap_param_gather ? overlapped(gather, cost.forward_compute, c.settings.overlap_cost) : gather;
    }
  }
  if (l.data_ranks() > 1 && stage == 2) {
    const double gather = groups.gather_s(parameter_gather_bytes(c, s));
    out.communication = p.overlap_param_gather ? overlapped(gather, cost.forward_compute, c.settings.overlap_cost) : gather;
  }
  if (!replicated) on_gpu = shard;
  if (p.cpu_offload) offloaded = shard;
  if (c.estimate.gemini) offloaded = shard * c.estimate.gemini->offload_optim_frac;
  on_gpu -= offloaded;
  if (offloaded > 0) {
    // Gradients down and 16-bit weights up over PCIe, then CPU Adam on the
    // node's share; FSDP's shards crossed PCIe unit by unit in the passes
    // (add_fsdp_offload_copies), so only its CPU step is left.
    const double copies = p.fsdp_offload() ? 0 : pcie_seconds(c, offloaded * (c.dtype_bytes() + 2));
    out.offload = copies + cpu_optimizer_seconds(c, offloaded);
  }
  out.optimizer = on_gpu * optimizer_step_bytes_per_param(p, c.request.training) / c.roofs.hbm_bytes_per_s;
  return out;
}

// All that follows the schedule: the tied embedding's sum, then the data-parallel step.
AfterPipeline after_pipeline(const Context& c, const StageShape& s, const StageCost& cost) {
  AfterPipeline out = data_parallel_step(c, s, cost);
  out.communication += tied_embedding_sum_seconds(c);
  return out;
}

// The step of `request`; with a memo, without events (they would need the pipeline run).
Result<StepSimulation> simulate(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request, const MemoryEstimate& estimate,
                                const SimulationSettings& settings, bool with_events, SimulationMemo* memo) {
  const auto& l = request.layout;
  const auto& t = request.training;
  if (l.world_size() != cluster.world_size()) {
    return make_error(ErrorCode::invalid_argument, "--dp x --tp x --pp = " + std::to_string(l.world_size()) + " but the cluster has " +
                                                       std::to_string(cluster.world_size()) + " GPUs");
  }
  const KernelRoofs roofs = kernel_roofs(cluster.gpu, t.precision, settings.memory_efficiency);
  const int64_t tokens_per_micro_batch = t.micro_batch_size * request.local_seq_len();
  const auto time_matmuls = [&] {
    return matmul_seconds_by_layer(model, tokens_per_micro_batch, l.tp, roofs, block_gemm_roofs(cluster.gpu, t.precision, settings.memory_efficiency));
  };
  std::vector<PassSeconds> own_matmuls;
  const auto make_table = [&] { return activation_table(model.config, t.activation_profile, t.precision, t.transformers_version); };
  ActivationTable own_table;
  const ActivationTable& table = memo ? memo->activation_table(t.activation_profile, t.precision, t.transformers_version, BlockAccounting::profile, LossAccounting::profile, make_table) : (own_table = make_table());
  const ActivationShape shape = activation_shape(request);
  const Context c{model, cluster, request, estimate, settings, roofs,
                  memo ? memo->matmuls(tokens_per_micro_batch, l.tp, t.precision, time_matmuls) : (own_matmuls = time_matmuls()),
                  block_activation_bytes(table, shape, RecomputeMode::none).stash, recomputed_block_bytes(table, shape, t.recompute),
                  t.recompute == RecomputeMode::op_selective
                      ? op_policy_gemm_seconds(model.config, tokens_per_micro_batch, l.tp, block_gemm_roofs(cluster.gpu, t.precision, settings.memory_efficiency).forward)
                      : 0.0,
                  elementwise_work(model.config, request, static_cast<double>(tokens_per_micro_batch)),
                  request.plugin.tp_comm_overlap && l.tp > 1 && request.plugin.runtime == Runtime::megatron  // Transformer Engine's userbuffers
                      ? userbuffer_sm_margin_seconds(model, tokens_per_micro_batch, l.tp, block_gemm_roofs(cluster.gpu, t.precision, settings.memory_efficiency).forward)
                      : 0.0,
                  pipeline_send_hold_seconds(model, cluster, request)};
  std::vector<StageShape> own_stages;
  const std::vector<StageShape>& stages = memo ? memo->stage_layouts(model, request) : (own_stages = stage_layouts(model, request));
  std::vector<StageCost> costs;
  for (const StageShape& s : stages) costs.push_back(stage_cost(c, s));
  // A send that holds its stage is in the pass's time already (stage_cost), its transfer over when the pass ends.
  const double p2p = c.pipeline_send_hold_s > 0 ? 0.0 : pipeline_send_seconds(model, cluster, request);
  StepSimulation sim;
  const std::vector<ChunkPassSeconds> passes = chunk_pass_seconds(c, stages, costs);
  PipelineRun pipeline;
  if (memo) {
    // The run's inputs: the schedule's shape, the send time and every pass's seconds.
    std::vector<uint64_t> key{static_cast<uint64_t>(request.plugin.pp_schedule), static_cast<uint64_t>(t.num_micro_batches),
                              static_cast<uint64_t>(request.plugin.model_chunks()), SimulationMemo::bits(p2p)};
    for (const ChunkPassSeconds& pass : passes) {
      key.push_back(SimulationMemo::bits(pass.forward));
      key.push_back(SimulationMemo::bits(pass.backward));
    }
    pipeline.makespan = memo->makespan(key, [&] { return run_pipeline(c, passes, p2p, nullptr).makespan; });
  } else {
    pipeline = run_pipeline(c, passes, p2p, with_events ? &sim.events : nullptr);
  }

  // The busiest stage sets the step's critical path.
  size_t slowest = 0;
  for (size_t k = 1; k < costs.size(); ++k) {
    if (costs[k].forward_s() + costs[k].backward_s() > costs[slowest].forward_s() + costs[slowest].backward_s()) slowest = k;
  }
  const StageCost& cost = costs[slowest];
  const AfterPipeline after = after_pipeline(c, stages[slowest], cost);
  const double m = static_cast<double>(t.num_micro_batches);
  StepBreakdown& b = sim.breakdown;
  b.forward_s = m * cost.forward_compute;
  b.backward_s = m * cost.backward_compute;
  b.recompute_s = m * cost.recompute;
  b.offload_s = m * cost.offload() + after.offload;
  b.communication_s = m * (cost.forward_comm + cost.backward_comm) + after.communication;
  b.optimizer_s = after.optimizer;
  b.bubble_s = std::max(0.0, pipeline.makespan - m * (cost.forward_s() + cost.backward_s()));
  sim.step_time_s = pipeline.makespan + after.communication + after.offload + after.optimizer;
  if (with_events) {
    double at = pipeline.makespan;
    struct Tail {
      const char* name;
      const char* category;
      double seconds;
    };
    for (const Tail& tail : {Tail{"gradient reduction", "communication", after.communication},
                             Tail{"offload + CPU optimizer", "offload", after.offload},
                             Tail{"optimizer step", "optimizer", after.optimizer}}) {
      const auto& [name, category, seconds] = tail;
      if (seconds <= 0) continue;
      for (int64_t k = 0; k < l.pp; ++k) sim.events.push_back({name, category, static_cast<int>(2 * k + 1), at, seconds});
      at += seconds;
    }
  }
  const double tokens = m * c.tokens_per_micro_batch() * static_cast<double>(l.data_ranks());
  const FlopsPerToken flops = flops_per_token(model, request);
  const double gpus = static_cast<double>(l.world_size());
  sim.tokens_per_s = tokens / sim.step_time_s;
  sim.model_tflops_per_gpu = 3 * flops.forward * tokens / sim.step_time_s / gpus / 1e12;
  sim.hardware_tflops_per_gpu = flops.total() * tokens / sim.step_time_s / gpus / 1e12;
  sim.mfu = sim.model_tflops_per_gpu * 1e12 / roofs.peak_flops;
  return sim;
}

}  // namespace

Result<StepSimulation> simulate_step(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request,
                                     const MemoryEstimate& estimate, const SimulationSettings& settings, bool with_events) {
  return simulate(model, cluster, request, estimate, settings, with_events, nullptr);
}

Result<StepSimulation> simulate_step(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request, const MemoryEstimate& estimate,
                                     const SimulationSettings& settings, SimulationMemo& memo) {
  return simulate(model, cluster, request, estimate, settings, false, &memo);
}

double pipeline_send_seconds(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request) {
  const auto& l = request.layout;
  if (l.pp <= 1) return 0.0;
  const Link link = group_link(cluster, l.pp, l.tp * l.data_ranks());
  const auto boundary = static_cast<double>(stage_boundary_bytes(request.training.micro_batch_size, request.local_seq_len(),
                                                                  model.config.hidden_size, request.training.precision, l));
  const bool scattered = l.tp > 1 && (request.plugin.pipeline_scatter_gather || request.plugin.deepspeed_pipeline());
  if (!scattered) return boundary / link.bytes_per_s + link.latency_s;
  const double tp = static_cast<double>(l.tp);
  return boundary / tp / link.bytes_per_s + link.latency_s + collective_seconds(Collective::all_gather, boundary, collective_group(cluster, l.tp, 1));
}

double pipeline_send_hold_seconds(const Model& model, const ClusterSpec& cluster, const EstimateRequest& request) {
  const PluginOptions& p = request.plugin;
  if (request.layout.pp <= 1) return 0.0;
  if (p.deepspeed_pipeline()) return pipeline_send_seconds(model, cluster, request);
  if (p.runtime != Runtime::megatron) return 0.0;
  const bool interleaved = p.pp_schedule == PipelineSchedule::interleaved;
  if (interleaved && !p.no_overlap_p2p_comm) return 0.0;
  return (interleaved ? 0.5 : 1.0) * pipeline_send_seconds(model, cluster, request);
}

}  // namespace tessera::planner
