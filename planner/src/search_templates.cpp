// The plugins and layouts the plan search tries, by runtime (PlanRequest::runtime):
// each runtime's candidates are those its model states describe and it runs
// (validate_runtime.cpp says what `tessera estimate` accepts under each).
//  - colossalai: every ColossalAI plugin: torch_ddp, torch_fsdp, low_level_zero
//    and gemini over pure data parallelism, hybrid_parallel for tp, pp and cp.
//  - megatron: Megatron-Core's data, tensor, pipeline and context parallelism
//    (hybrid_parallel), plain data parallelism included, with or without its
//    distributed optimizer (ZeRO stage 1); it shards nothing further.
//  - torchtitan: FSDP2 (torch_fsdp) over data and context parallelism, with or
//    without CPU offload; its tensor and pipeline parallelism are not modelled.
//  - deepspeed: ZeRO-3 (low_level_zero, stage 3) with nothing offloaded, the
//    optimizer offloaded (ZeRO-Offload), or the optimizer and the parameters
//    (ZeRO-Infinity's offload_param); and, in bf16 and fp16, its pipeline
//    engine (hybrid_parallel, deepspeed_pipeline.h) over tp × pp × dp with 2
//    stages or more: its own ZeRO-1, the 1F1B schedule, no context or sequence
//    parallelism (what the BLOOM and Megatron-DeepSpeed runs used).
#include <algorithm>
#include <vector>

#include "search_internal.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/deepspeed_pipeline.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/pipeline_stages.h"

namespace tessera::planner::search_detail {
namespace {

// Context-parallel sizes to try: --cp when given; else 1, and for sequences of
// kLongSequence tokens or more the powers of two up to 8 that divide the ranks
// left and split the sequence into 2·cp chunks. The bound keeps the search's
// size: below it a ring has little to hide behind (the attention is a small
// part of each block) and tensor parallelism already splits the activations.
std::vector<int64_t> context_parallel_sizes(const PlanRequest& p, int64_t ranks) {
  if (p.cp > 0) return ranks % p.cp == 0 ? std::vector<int64_t>{p.cp} : std::vector<int64_t>{};
  std::vector<int64_t> sizes{1};
  if (p.seq_len < kLongSequence) return sizes;
  for (int64_t cp = 2; cp <= 8; cp *= 2) {
    if (ranks % cp == 0 && p.seq_len % (2 * cp) == 0) sizes.push_back(cp);
  }
  return sizes;
}

// Collects the candidates the plugin filter admits, each from the request's
// common settings.
class Templates {
 public:
  Templates(const PlanRequest& p) : plugins_(p.plugins) {
    apply_shared_training(p, base_.training);
    base_.assumptions = p.assumptions;
    base_.plugin.runtime = p.runtime;
    base_.plugin.pin_memory = p.pin_memory;
    base_.plugin.grad_reduce_in_bf16 = p.grad_reduce_in_bf16;
    base_.plugin.fp8_param_gather = p.fp8_param_gather;
    base_.plugin.fused_rmsnorm = p.fused_rmsnorm;
    base_.plugin.compile_model_only = p.compile_model_only;
    base_.layout.dp = p.cluster.world_size();
  }

  bool admits(PluginKind kind) const { return allowed(plugins_, kind); }

  template <typename Configure>
  void add(PluginKind kind, Configure&& configure) {
    if (!admits(kind)) return;
    EstimateRequest r = base_;
    r.plugin.kind = kind;
    configure(r);
    out_.push_back(r);
  }

  std::vector<EstimateRequest> take() { return std::move(out_); }

 private:
  const std::vector<PluginKind>& plugins_;
  EstimateRequest base_;
  std::vector<EstimateRequest> out_;
};

// Whether the request leaves only plain data parallelism over every GPU.
bool pure_data_parallel(const PlanRequest& p) { return p.tp <= 1 && p.pp <= 1 && p.cp <= 1 && (p.dp == 0 || p.dp == p.cluster.world_size()); }

void add_gemini(const Model& m, const PlanRequest& p, Templates& out) {
  // ColossalAI's Gemini runs only mixed precision with an Adam (HybridAdam, CPUAdam, FusedAdam).
  if (p.zero_stage >= 0 || !is_mixed_precision(p.precision) || optimizer_state_count(p.optimizer) != 2 || !out.admits(PluginKind::gemini)) return;
  const int64_t n = p.cluster.world_size();
  GeminiOptions g;
  g.chunk_size = p.chunk_size > 0 ? p.chunk_size : search_chunk_size(m.inventory, g, n);  // once: every Gemini candidate shares it
  struct Placement {
    GeminiPlacement policy;
    double optim, param;
  };
  std::vector<Placement> placements = {{GeminiPlacement::cuda, 0, 0}, {GeminiPlacement::cpu, 1, 1}, {GeminiPlacement::auto_placement, 0, 0}};
  // Static offloads of a quarter, a half and three quarters of the chunks'
  // optimizer states, each as the fraction ColossalAI needs to be given for
  // it (gemini_static_placement.h), then all of them. No fraction of the
  // parameters: ColossalAI moves all of their chunks or none but a large
  // tensor's own (parameter_chunks_on_host), and all is the cpu placement.
  const ChunkLayout layout = pack_chunks(m.inventory, g.chunk_size, n);
  int64_t previous = 0;
  for (const int64_t quarters : {1, 2, 3}) {
    const int64_t chunks = (layout.num_chunks() * quarters + 2) / 4;
    if (chunks > previous && chunks < layout.num_chunks()) placements.push_back({GeminiPlacement::static_placement, offload_optim_frac_for(layout, chunks), 0});
    previous = std::max(previous, chunks);
  }
  placements.push_back({GeminiPlacement::static_placement, 1, 0});
  for (const Placement& pl : placements) {
    // On one GPU, sharding shards nothing: only the offloading variants differ from DDP.
    if (n == 1 && pl.optim == 0 && pl.param == 0 && pl.policy != GeminiPlacement::auto_placement) continue;
    out.add(PluginKind::gemini, [&](EstimateRequest& r) {
      r.plugin.gemini = g;
      r.plugin.gemini.placement_policy = pl.policy;
      r.plugin.gemini.offload_optim_frac = pl.optim;
      r.plugin.gemini.offload_param_frac = pl.param;
    });
  }
}

// ColossalAI's data-parallel plugins.
void add_colossalai_data_parallel(const Model& m, const PlanRequest& p, Templates& out) {
  if (!pure_data_parallel(p)) return;
  const bool sharding_helps = p.cluster.world_size() > 1;
  if (p.zero_stage <= 0) out.add(PluginKind::torch_ddp, [](EstimateRequest&) {});
  for (FsdpStrategy s : {FsdpStrategy::full_shard, FsdpStrategy::shard_grad_op}) {
    for (bool offload : {false, true}) {
      if (p.zero_stage < 0 && sharding_helps) {
        out.add(PluginKind::torch_fsdp, [=](EstimateRequest& r) { r.plugin.fsdp_strategy = s; r.plugin.cpu_offload = offload; });
      }
    }
  }
  for (int stage : {1, 2}) {
    for (bool offload : {false, true}) {
      if ((p.zero_stage < 0 || p.zero_stage == stage) && (offload || sharding_helps)) {
        out.add(PluginKind::low_level_zero, [=](EstimateRequest& r) { r.plugin.zero_stage = stage; r.plugin.cpu_offload = offload; });
      }
    }
  }
  add_gemini(m, p, out);
}

// What a runtime's hybrid_parallel runs: which ZeRO stages; whether plain data
// parallelism too (ColossalAI leaves tp = pp = cp = 1 to its data-parallel
// plugins; Megatron-Core runs it itself); the fewest stages; and whether the
// interleaved schedule, context and sequence parallelism are among its choices.
struct HybridLayouts {
  std::vector<int> stages;
  bool pure_data_parallel = false;
  int64_t min_pp = 1;
  bool interleaved = true;
  bool context_parallel = true;
  bool sequence_parallel = true;
};

void add_hybrid_parallel(const Model& m, const PlanRequest& p, const HybridLayouts& h, Templates& out) {
  if (!out.admits(PluginKind::hybrid_parallel)) return;
  const ModelConfig& c = m.config;
  const int64_t n = p.cluster.world_size();
  for (int64_t tp : divisors(n)) {
    if (!tensor_parallel_allowed(c, p, tp) || (p.tp > 0 && tp != p.tp)) continue;
    // Any number of stages up to the layer count: where it does not divide the
    // layers, split_layers gives the first and last stages the fewer blocks.
    for (int64_t pp : divisors(n / tp)) {
      const std::vector<int64_t> cp_sizes = h.context_parallel ? context_parallel_sizes(p, n / (tp * pp)) : std::vector<int64_t>{1};
      for (int64_t cp : cp_sizes) {
        if (pp > c.num_layers || pp < h.min_pp || (p.pp > 0 && pp != p.pp) || (tp == 1 && pp == 1 && cp == 1 && !h.pure_data_parallel)) continue;
        const int64_t dp = n / (tp * pp * cp);
        if (p.dp > 0 && dp != p.dp) continue;
        // Pipelines run 1F1B, and interleaved where some chunk count divides
        // every stage's blocks: one candidate, at the largest count, which the
        // search replaces by the count its 1F1B twin predicts fastest
        // (search_plans_impl). After 1F1B, so that the twin comes first.
        std::vector<int64_t> chunk_counts{1};
        const std::vector<int64_t> interleaved = interleaved_chunk_counts(c.num_layers, pp);
        if (h.interleaved && !interleaved.empty()) chunk_counts.push_back(interleaved.back());
        // Sequence parallelism is a choice (PlanRequest::sequence_parallel): it
        // divides the norms' and residuals' activations by tp but moves more
        // bytes (backward gathers the norm outputs again, tp_traffic.h). With it
        // first, so that the search can skip a layout without it where the
        // layout with it is over memory already (search_plans_impl).
        std::vector<bool> sequence_parallel;
        const bool sp_divides = (p.seq_len / cp) % tp == 0;
        if (h.sequence_parallel && tp > 1 && sp_divides && p.sequence_parallel != SequenceParallelChoice::off) sequence_parallel.push_back(true);
        if (tp == 1 || p.sequence_parallel != SequenceParallelChoice::on || !sp_divides || !h.sequence_parallel) sequence_parallel.push_back(false);
        for (int stage : h.stages) {
          // A sharded stage on one data rank is its stage-0 twin, where the runtime offers one.
          const bool unsharded_twin = stage > 0 && dp * cp == 1 && std::find(h.stages.begin(), h.stages.end(), 0) != h.stages.end();
          if ((stage == 2 && pp > 1) || (p.zero_stage >= 0 && stage != p.zero_stage) || unsharded_twin) continue;
          for (int64_t chunks : chunk_counts) {
            for (bool sp : sequence_parallel) {
              out.add(PluginKind::hybrid_parallel, [=](EstimateRequest& r) {
                r.layout = ParallelLayout{dp, tp, pp, sp, cp};
                r.plugin.zero_stage = stage;
                r.plugin.pp_schedule = chunks > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
                r.plugin.num_model_chunks = chunks;
              });
            }
          }
        }
      }
    }
  }
}

// torchtitan's FSDP2: resharding after forward or not, each with and without
// CPU offload (--training.enable_cpu_offload), over dp and cp.
void add_torchtitan(const PlanRequest& p, Templates& out) {
  if (p.tp > 1 || p.pp > 1 || p.cluster.world_size() == 1) return;
  const int64_t n = p.cluster.world_size();
  for (int64_t cp : context_parallel_sizes(p, n)) {
    if (p.dp > 0 && n / cp != p.dp) continue;
    for (FsdpStrategy s : {FsdpStrategy::full_shard, FsdpStrategy::shard_grad_op}) {
      for (bool offload : {false, true}) {
        out.add(PluginKind::torch_fsdp, [=](EstimateRequest& r) {
          r.layout.dp = n / cp;
          r.layout.cp = cp;
          r.plugin.fsdp_strategy = s;
          r.plugin.cpu_offload = offload;
        });
      }
    }
  }
}

// DeepSpeed ZeRO-3: nothing offloaded, the optimizer (offload_optimizer), or
// the optimizer and the 16-bit parameters (offload_param) on the host. Under
// offload DeepSpeed steps with its CPU Adam only (check_deepspeed).
void add_deepspeed(const PlanRequest& p, Templates& out) {
  if (!pure_data_parallel(p) || (p.zero_stage >= 0 && p.zero_stage != 3)) return;
  const bool cpu_adam = optimizer_state_count(p.optimizer) == 2;
  for (auto [offload_optimizer, offload_param] : {std::pair{false, false}, std::pair{true, false}, std::pair{true, true}}) {
    if (offload_optimizer && !cpu_adam) continue;
    out.add(PluginKind::low_level_zero, [=](EstimateRequest& r) {
      r.plugin.zero_stage = 3;
      r.plugin.cpu_offload = offload_optimizer;
      r.plugin.deepspeed.offload_param = offload_param;
    });
  }
}

}  // namespace

std::vector<EstimateRequest> plugin_templates(const Model& m, const PlanRequest& p) {
  Templates out(p);
  switch (p.runtime) {
    case Runtime::colossalai:
      add_colossalai_data_parallel(m, p, out);
      add_hybrid_parallel(m, p, HybridLayouts{.stages = {0, 1, 2}}, out);
      break;
    case Runtime::megatron: {
      // --fp8-param-gather runs with the distributed optimizer only (Megatron-LM's validate_args).
      const std::vector<int> stages = p.fp8_param_gather ? std::vector<int>{1} : std::vector<int>{0, 1};
      add_hybrid_parallel(m, p, HybridLayouts{.stages = stages, .pure_data_parallel = true}, out);
      break;
    }
    case Runtime::torchtitan: add_torchtitan(p, out); break;
    case Runtime::deepspeed:
      add_deepspeed(p, out);
      if (deepspeed_pipeline_precision(p.precision)) {
        const HybridLayouts engine{.stages = {1}, .min_pp = 2, .interleaved = false, .context_parallel = false, .sequence_parallel = false};
        add_hybrid_parallel(m, p, engine, out);
      }
      break;
  }
  return out.take();
}

}  // namespace tessera::planner::search_detail
