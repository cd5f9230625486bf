// The plan search's checks of its request: the request on its own, and why
// the filters leave no candidate before memory is considered; each message
// names the option or input that excludes every layout, and the fix.
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>

#include "search_internal.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/gradient_accumulation.h"
#include "tessera/planner/memory_headroom.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/search.h"
#include "model_states.h"

namespace tessera::planner {
namespace {

using search_detail::allowed;

Error invalid(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }
std::string str(int64_t v) { return std::to_string(v); }

// The tensor-parallel sizes the search tries on this cluster, "1, 2, 4, 8".
std::string usable_tensor_parallel(const ModelConfig& c, const PlanRequest& p) {
  std::string out;
  for (int64_t tp : search_detail::divisors(p.cluster.world_size())) {
    if (search_detail::tensor_parallel_allowed(c, p, tp)) out += (out.empty() ? "" : ", ") + str(tp);
  }
  return out;
}

std::string plugin_names(const std::vector<PluginKind>& plugins) {
  std::string out;
  for (PluginKind kind : plugins) out += (out.empty() ? "" : ",") + std::string(enum_name(kind));
  return out;
}

// True when the filter names plugins and all of them are among `kinds`.
bool only(const std::vector<PluginKind>& plugins, std::span<const PluginKind> kinds) {
  return !plugins.empty() && std::all_of(plugins.begin(), plugins.end(), [&](PluginKind k) {
    return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
  });
}
bool only(const std::vector<PluginKind>& plugins, std::initializer_list<PluginKind> kinds) {
  return only(plugins, std::span<const PluginKind>(kinds.begin(), kinds.size()));
}

// The explain_* checks below say why the filters leave no candidate. They run
// only when plan_candidates() is empty, so none can refuse a search that had
// candidates; each mirrors a condition of plugin_templates or plan_candidates.

Status explain_degrees(const Model& m, const PlanRequest& p) {
  const int64_t n = p.cluster.world_size();
  if (p.tp > 0) {
    if (Status s = check_tensor_parallel(m.config, p.tp); !s) {
      // The estimate's reason up to its own list, then the sizes this cluster allows.
      const std::string& reason = s.error().message;
      return invalid(reason.substr(0, reason.find("; ")) + "; use --tp " + usable_tensor_parallel(m.config, p) +
                     " (dividing the heads, key/value heads and MLP width, within a node of " + str(p.cluster.gpus_per_node) + ")");
    }
  }
  if (p.pp > m.config.num_layers) {
    return invalid("--pp " + str(p.pp) + " exceeds the " + str(m.config.num_layers) + " layers of " + m.config.name + "; use at most --pp " +
                   str(m.config.num_layers));
  }
  if ((p.tp > 1 || p.pp > 1) && !allowed(p.plugins, PluginKind::hybrid_parallel)) {
    return invalid("--tp/--pp above 1 need --plugin hybrid_parallel (" + plugin_names(p.plugins) + " is data parallel only)");
  }
  int64_t product = 1;  // each degree divides n (validate_plan_request): no overflow
  std::string named;
  for (auto [option, value] : {std::pair{"--dp", p.dp}, std::pair{"--tp", p.tp}, std::pair{"--pp", p.pp}}) {
    if (value <= 0) continue;
    product *= value;
    named += (named.empty() ? "" : " × ") + std::string(option) + " " + str(value);
  }
  if (n % product != 0) return invalid(named + " = " + str(product) + " does not divide the " + str(n) + " GPUs");
  if (p.dp > 0 && p.dp < n && !allowed(p.plugins, PluginKind::hybrid_parallel)) {
    return invalid("--dp " + str(p.dp) + " on " + str(n) + " GPUs leaves a factor of " + str(n / p.dp) +
                   " to --tp or --pp, which need --plugin hybrid_parallel (" + plugin_names(p.plugins) + " is data parallel only)");
  }
  return Status::success();
}

// The stages each plugin runs in the search: torch_ddp 0, low_level_zero 1 and
// 2, hybrid_parallel 0 to 2; torch_fsdp and gemini shard everything (ZeRO-3).
bool runs_zero_stage(PluginKind kind, int stage) {
  switch (kind) {
    case PluginKind::torch_ddp: return stage == 0;
    case PluginKind::low_level_zero: return stage == 1 || stage == 2;
    case PluginKind::hybrid_parallel: return stage <= 2;
    case PluginKind::torch_fsdp:
    case PluginKind::gemini: return false;
  }
  return false;
}

Status explain_zero_stage(const PlanRequest& p) {
  if (p.zero_stage < 0) return Status::success();
  const std::string stage = "--zero-stage " + std::to_string(p.zero_stage);
  // Under another runtime check_plan_runtime has held the stage to the runtime's.
  if (p.runtime == Runtime::colossalai && p.zero_stage > 2) return invalid(stage + ": the search tries stages 0 to 2; for ZeRO-3 use --plugin torch_fsdp or gemini without --zero-stage");
  if (p.runtime == Runtime::colossalai && !p.plugins.empty() && std::none_of(p.plugins.begin(), p.plugins.end(), [&](PluginKind k) { return runs_zero_stage(k, p.zero_stage); })) {
    return invalid(stage + " does not apply to --plugin " + plugin_names(p.plugins) +
                   ": torch_ddp runs stage 0, low_level_zero 1 or 2, hybrid_parallel 0 to 2; torch_fsdp and gemini are ZeRO-3");
  }
  if (p.zero_stage > 0 && p.dp == 1 && p.cluster.world_size() > 1) {
    return invalid(stage + " shards over the data-parallel ranks, and --dp 1 leaves none; use --zero-stage 0 or a larger --dp");
  }
  if (Status s = check_zero_stage_with_pipeline(stage, p.zero_stage, p.pp); !s) return s;
  return Status::success();
}

Status explain_plugins(const PlanRequest& p) {
  const std::string plugins = "--plugin " + plugin_names(p.plugins);
  // As in plugin_templates: ColossalAI's Gemini runs only mixed precision with an Adam (HybridAdam, CPUAdam, FusedAdam).
  if (only(p.plugins, {PluginKind::gemini})) {
    if (Status s = gemini_precision_and_optimizer(p.precision, p.optimizer); !s) return s;
  }
  if (p.cluster.world_size() == 1 && only(p.plugins, {PluginKind::torch_fsdp, PluginKind::hybrid_parallel})) {
    return invalid(plugins + " needs 2 GPUs or more: on 1 GPU it has nothing to shard or split");
  }
  if (p.runtime == Runtime::colossalai && only(p.plugins, {PluginKind::hybrid_parallel}) && p.tp == 1 && p.pp == 1) {
    return invalid(plugins + " with --tp 1 and --pp 1 is plain data parallelism, which the search leaves to torch_ddp and low_level_zero;"
                   " raise --tp or --pp");
  }
  return Status::success();
}

// What --runtime runs (search_templates.cpp), checked before the search so
// that a filter outside it is named rather than left to an empty search.
// Stages, precision and recompute modes are refused as the estimate refuses
// them (check_runtime), on a candidate of the runtime's plugin.
Status check_plan_runtime(const PlanRequest& p) {
  const std::string runtime = "--runtime " + std::string(enum_name(p.runtime));
  const bool op_selective = std::find(p.recompute.begin(), p.recompute.end(), RecomputeMode::op_selective) != p.recompute.end();
  if (op_selective && p.runtime != Runtime::torchtitan) {
    return invalid("--recompute op_selective is torchtitan's op-level checkpointing: add --runtime torchtitan, or use --recompute selective or full");
  }
  if (p.recompute_num_layers < 0) {
    return invalid("--recompute-num-layers must be a positive count of blocks (or 0 for every block), got " + std::to_string(p.recompute_num_layers));
  }
  if (p.recompute_num_layers > 0 && p.recompute != std::vector<RecomputeMode>{RecomputeMode::full}) {
    return invalid("--recompute-num-layers " + std::to_string(p.recompute_num_layers) +
                   " says how many blocks of each chunk full recompute recomputes whole: add --recompute full");
  }
  if ((p.grad_reduce_in_bf16 || p.fp8_param_gather) && p.runtime != Runtime::megatron) {
    return invalid(std::string(p.grad_reduce_in_bf16 ? "--grad-reduce-in-bf16" : "--fp8-param-gather") + " is Megatron-LM's: add --runtime megatron");
  }
  if (p.fused_rmsnorm && !fused_rmsnorm_applies(p.runtime, p.activation_profile, p.torch_compile)) {
    return invalid("--fused-rmsnorm is torchtitan's Triton RMSNorm in its eager Llama block: add --runtime torchtitan, without --torch-compile, "
                   "with --activation-profile flash");
  }
  if (p.compile_model_only && !compile_model_only_applies(p.runtime, p.activation_profile, p.torch_compile)) {
    return invalid("--compile-model-only leaves torchtitan's loss out of torch.compile: add --runtime torchtitan and --torch-compile, "
                   "with --activation-profile flash");
  }
  if (p.grad_reduce_in_bf16 && !grad_reduce_in_bf16_applies(p.precision)) {
    return invalid("--grad-reduce-in-bf16 keeps the bf16 runs' fp32 gradient buffer in bf16: it needs --precision bf16 or fp8");
  }
  if (p.fp8_param_gather && (p.precision != Precision::fp8 || p.zero_stage == 0)) {
    return invalid("--fp8-param-gather keeps Transformer Engine's weights in FP8 under the distributed optimizer: it needs --precision fp8, "
                   "and no --zero-stage 0");
  }
  if (p.runtime == Runtime::colossalai) return Status::success();
  if (p.chunk_size > 0) return invalid("--chunk-size is Gemini's (ColossalAI): drop it under " + runtime);
  const bool deepspeed = p.runtime == Runtime::deepspeed;
  // DeepSpeed runs ZeRO-3 (low_level_zero) and its pipeline engine (hybrid_parallel).
  const PluginKind plugin = deepspeed && (only(p.plugins, {PluginKind::hybrid_parallel}) || p.tp > 1 || p.pp > 1 || p.zero_stage == 1)
                                ? PluginKind::hybrid_parallel
                                : runtime_plugin(p.runtime);
  const std::vector<PluginKind> runs = deepspeed ? std::vector<PluginKind>{PluginKind::low_level_zero, PluginKind::hybrid_parallel}
                                                 : std::vector<PluginKind>{plugin};
  if (!p.plugins.empty() && !only(p.plugins, runs)) {
    return invalid(runtime + " searches " + plugin_names(runs) + " plans, its model states: drop --plugin " + plugin_names(p.plugins));
  }
  if (p.runtime == Runtime::torchtitan) {
    if (p.zero_stage >= 0) return invalid("--zero-stage under " + runtime + ": FSDP2 shards every model state; drop --zero-stage");
    if (p.tp > 1 || p.pp > 1) {
      return invalid("--tp and --pp under " + runtime + ": torchtitan's FSDP2 is modelled over --dp and --cp only; use --runtime megatron "
                     "for tensor and pipeline parallelism");
    }
    if (p.cluster.world_size() == 1) return invalid(runtime + " shards over 2 GPUs or more (FSDP2); use --gpus 2 or more, or --runtime colossalai");
    // One GPU per replica: torchtitan runs DDP (validate_runtime.cpp).
    if (p.dp_replicate >= p.cluster.world_size()) {
      return invalid("--dp-replicate " + std::to_string(p.dp_replicate) + " under " + runtime +
                     " leaves one GPU per replica, which torchtitan runs as DDP (not modelled); use --dp-replicate " +
                     std::to_string(p.cluster.world_size() / 2) + " or less");
    }
  }
  if (deepspeed && p.cp > 1) {
    return invalid("--cp under " + runtime + ": neither its ZeRO-3 nor its pipeline engine is modelled with context parallelism; "
                   "use --runtime megatron or torchtitan");
  }
  // The request's settings on a layout of every GPU: what check_runtime says of them alone.
  EstimateRequest probe;
  probe.layout.dp = p.cluster.world_size();
  probe.layout.dp_replicate = p.dp_replicate;
  probe.plugin.runtime = p.runtime;
  probe.plugin.kind = plugin;
  probe.plugin.zero_stage = p.zero_stage;
  probe.training.precision = p.precision;
  probe.training.optimizer = p.optimizer;
  for (RecomputeMode mode : p.recompute.empty() ? std::vector<RecomputeMode>{RecomputeMode::none} : p.recompute) {
    probe.training.recompute = mode;
    if (Status s = check_runtime(probe); !s) return s;
  }
  return Status::success();
}

Status explain_batch(const PlanRequest& p) {
  const int64_t g = p.global_batch_size;
  if (p.micro_batch_size > 0 && g % p.micro_batch_size != 0) {
    return invalid("--micro-batch " + str(p.micro_batch_size) + " does not divide --global-batch " + str(g) + " (a step is whole micro-batches)");
  }
  if (p.dp > 0 && g % p.dp != 0) {
    return invalid("--global-batch " + str(g) + " is not divisible by --dp " + str(p.dp) + " (every data-parallel rank takes an equal share)");
  }
  return Status::success();
}

// A filter as given on the command line, and the request without it.
struct GivenFilter {
  std::string text;
  PlanRequest without;
};

std::vector<GivenFilter> given_filters(const PlanRequest& p) {
  std::vector<GivenFilter> out;
  const auto add = [&](std::string text, auto clear) {
    PlanRequest without = p;
    clear(without);
    out.push_back(GivenFilter{std::move(text), std::move(without)});
  };
  if (!p.plugins.empty()) add("--plugin " + plugin_names(p.plugins), [](PlanRequest& r) { r.plugins.clear(); });
  if (p.dp > 0) add("--dp " + str(p.dp), [](PlanRequest& r) { r.dp = 0; });
  if (p.tp > 0) add("--tp " + str(p.tp), [](PlanRequest& r) { r.tp = 0; });
  if (p.pp > 0) add("--pp " + str(p.pp), [](PlanRequest& r) { r.pp = 0; });
  if (p.micro_batch_size > 0) add("--micro-batch " + str(p.micro_batch_size), [](PlanRequest& r) { r.micro_batch_size = 0; });
  if (p.zero_stage >= 0) add("--zero-stage " + std::to_string(p.zero_stage), [](PlanRequest& r) { r.zero_stage = -1; });
  return out;
}

// When no single check above explains it. Where the search has layouts but the
// global batch splits over none of their data-parallel sizes, that is the
// reason, and the smallest size says which batches work; otherwise the
// filters whose removal alone would leave candidates.
Status explain_by_elimination(const Model& m, const PlanRequest& p) {
  const int64_t n = p.cluster.world_size();
  const std::vector<GivenFilter> filters = given_filters(p);
  std::string given, culprits;
  for (const GivenFilter& f : filters) {
    given += (given.empty() ? "" : " ") + f.text;
    if (!plan_candidates(m, f.without).empty()) culprits += (culprits.empty() ? "" : " or ") + f.text;
  }
  std::set<int64_t> dp_sizes;
  // The smallest batch some layout runs: dp whole sequences, and under a pipeline
  // pp micro-batches per data-parallel rank (check_pipeline_schedule).
  int64_t smallest_batch = 0;
  for (const EstimateRequest& r : search_detail::plugin_templates(m, p)) {
    dp_sizes.insert(r.layout.dp);
    const int64_t batch = r.layout.dp * r.layout.pp;
    if (smallest_batch == 0 || batch < smallest_batch) smallest_batch = batch;
  }
  const bool batch_is_the_reason = !dp_sizes.empty() && p.micro_batch_size == 0;
  if (batch_is_the_reason) {
    std::string sizes;
    for (int64_t dp : dp_sizes) sizes += (sizes.empty() ? "" : ", ") + str(dp);
    const std::string where = " of any layout of " + m.config.name + " on " + str(n) + " GPUs" + (given.empty() ? "" : " with " + given);
    const std::string or_drop = culprits.empty() ? "" : ", or drop or change " + culprits;
    const bool splits_somewhere = std::any_of(dp_sizes.begin(), dp_sizes.end(), [&](int64_t dp) { return p.global_batch_size % dp == 0; });
    const bool pipelines_need_more = smallest_batch > *dp_sizes.begin();
    const std::string at_least = pipelines_need_more ? " and at least " + str(smallest_batch) +
                                                           " (a pipeline needs a micro-batch per stage on every data-parallel rank)"
                                                     : "";
    if (!splits_somewhere) {
      return invalid("--global-batch " + str(p.global_batch_size) + " does not split evenly over the data-parallel ranks" + where +
                     " (data-parallel sizes " + sizes + "); use a multiple of " + str(*dp_sizes.begin()) + at_least + or_drop);
    }
    return invalid("--global-batch " + str(p.global_batch_size) + " leaves fewer micro-batches than pipeline stages" + where +
                   " (a pipeline needs a micro-batch per stage on every data-parallel rank); use --global-batch " + str(smallest_batch) +
                   " or more" + or_drop);
  }
  const std::string none = "no candidate for " + m.config.name + " on " + str(n) + " GPUs with --global-batch " + str(p.global_batch_size) +
                           " satisfies " + given;
  return invalid(none + (culprits.empty() ? "; drop some of these filters" : "; drop or change " + culprits));
}

// The estimate refuses some candidates (they count as rejections); when it
// refuses every one, the request is at fault, e.g. an odd --seq with --tp 2,
// which the search pairs with sequence parallelism.
Status check_some_candidate_valid(const Model& m, const PlanRequest& p, const std::vector<EstimateRequest>& candidates) {
  std::optional<Error> first;
  for (const EstimateRequest& r : candidates) {
    Status s = validate_request(m, p.cluster.gpu, r);
    if (s) return Status::success();
    if (!first) first = s.error();
  }
  return invalid("the estimate refuses every candidate, first " + describe_plan(candidates.front()) + ": " + first->message);
}

}  // namespace

Status validate_plan_filters(const Model& model, const PlanRequest& p) {
  const std::vector<EstimateRequest> candidates = plan_candidates(model, p);
  if (!candidates.empty()) return check_some_candidate_valid(model, p, candidates);
  for (const Status& s : {explain_degrees(model, p), explain_zero_stage(p), explain_plugins(p), explain_batch(p)}) {
    if (!s) return s;
  }
  return explain_by_elimination(model, p);
}

Status validate_plan_request(const Model& model, const PlanRequest& p) {
  const int64_t n = p.cluster.world_size();
  if (p.global_batch_size <= 0) return invalid("--global-batch must be a positive integer, got " + str(p.global_batch_size));
  if (p.seq_len <= 0) return invalid("--seq must be a positive integer, got " + str(p.seq_len));
  if (model.config.learned_positions && p.seq_len > model.config.max_positions) {
    return invalid("--seq " + str(p.seq_len) + " exceeds the " + str(model.config.max_positions) + " learned positions of " + model.config.name);
  }
  if (Status s = check_precision(p.precision, p.activation_profile, p.cluster.gpu); !s) return s;
  if (Status s = check_memory_headroom(p.assumptions, p.cluster.gpu); !s) return s;
  if (runs_hugging_face_modules(p.activation_profile)) {
    if (auto reason = unsupported_transformers_version(p.transformers_version, model.config.family)) return invalid(*reason);
  }
  if (Status s = check_plan_runtime(p); !s) return s;
  {
    // The model and the settings every candidate shares, as the runtime's own code takes them.
    EstimateRequest probe;
    probe.plugin.runtime = p.runtime;
    probe.training.seq_len = p.seq_len;
    probe.training.activation_profile = p.activation_profile;
    probe.training.torch_compile = p.torch_compile;
    probe.training.optimizer = p.optimizer;
    if (Status s = check_runtime_model(model.config, probe); !s) return s;
  }
  if (p.pp_schedule == PipelineSchedule::gpipe) {
    return invalid("--pp-schedule gpipe: the search runs ColossalAI's pipelines, 1F1B and interleaved; use --pp-schedule 1f1b or interleaved");
  }
  if (p.tp > p.cluster.gpus_per_node) {
    return invalid("--tp " + str(p.tp) + " exceeds --gpus-per-node " + str(p.cluster.gpus_per_node) + " (tensor parallelism stays inside a node)");
  }
  const int64_t cp = std::max<int64_t>(p.cp, 1);
  if (p.dp > 0 && p.tp > 0 && p.pp > 0 && p.dp * p.tp * p.pp * cp != n) {
    return invalid("--dp " + str(p.dp) + " × --tp " + str(p.tp) + " × --pp " + str(p.pp) + (cp > 1 ? " × --cp " + str(cp) : "") + " = " +
                   str(p.dp * p.tp * p.pp * cp) + " but the cluster has " + str(n) + " GPUs");
  }
  for (auto [option, value] : {std::pair{"--dp", p.dp}, std::pair{"--tp", p.tp}, std::pair{"--pp", p.pp}, std::pair{"--cp", p.cp}}) {
    if (value < 0 || (value > 0 && n % value != 0)) {
      const std::string fix = std::string(option) == "--tp" ? "use --tp " + usable_tensor_parallel(model.config, p) : "use a divisor of " + str(n);
      return invalid(std::string(option) + " " + str(value) + " does not divide the " + str(n) + " GPUs; " + fix);
    }
  }
  if (Status s = check_context_parallel_sequence(p.seq_len, cp, p.activation_profile); !s) return s;
  if (p.dp_replicate < 1 || (p.dp_replicate > 1 && n % p.dp_replicate != 0)) {
    return invalid("--dp-replicate " + str(p.dp_replicate) + " must be a positive divisor of the " + str(n) + " GPUs (replicas of equal size)");
  }
  if (p.zero_stage < -1) return invalid("--zero-stage must be 0, 1 or 2 (leave it out to search every stage), got " + std::to_string(p.zero_stage));
  if (p.micro_batch_size < 0) return invalid("--micro-batch must be a positive integer, got " + str(p.micro_batch_size));
  if (p.micro_batch_size > 0 && p.dp > 0 && p.global_batch_size % (p.micro_batch_size * p.dp) != 0) {
    return invalid("--global-batch " + str(p.global_batch_size) + " is not divisible by --micro-batch " + str(p.micro_batch_size) +
                   " × dp " + str(p.dp) + " = " + str(p.micro_batch_size * p.dp));
  }
  if (p.global_batch_size > (int64_t{1} << 24) || p.seq_len > (int64_t{1} << 20)) return invalid("--global-batch or --seq is too large");
  // Gemini shards each chunk over all n ranks: a chunk splits evenly (Chunk.__init__ asserts
  // chunk_size % pg_size == 0, colossalai/zero/gemini/chunk/chunk.py at v0.5.0, d322ff8c).
  if (p.chunk_size < 0 || p.chunk_size > (int64_t{1} << 40) || (p.chunk_size > 0 && p.chunk_size % n != 0)) {
    return invalid("--chunk-size " + str(p.chunk_size) + " must be 0 (search) or a positive multiple of the " + str(n) +
                   " GPUs (Gemini shards every chunk evenly over them)");
  }
  return Status::success();
}

}  // namespace tessera::planner
