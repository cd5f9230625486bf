// Plan search: enumerate, estimate, simulate, rank, explain.
#include "tessera/planner/search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/pinned_host_blocks.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/report.h"
#include "interleaving_choice.h"
#include "search_internal.h"
#include "simulation_memo.h"

namespace tessera::planner {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

namespace search_detail {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

bool allowed(const std::vector<PluginKind>& plugins, PluginKind kind) {
  return plugins.empty() || std::find(plugins.begin(), plugins.end(), kind) != plugins.end();
}

bool tensor_parallel_allowed(const ModelConfig& c, const PlanRequest& p, int64_t tp) {
  const int64_t n = p.cluster.world_size();
  return tp <= p.cluster.gpus_per_node && n % tp == 0 && c.num_heads % tp == 0 && c.num_kv_heads % tp == 0 && c.intermediate_size % tp == 0;
}

}  // namespace search_detail

namespace {

using search_detail::divisors;
using search_detail::plugin_templates;

// Offloaded states of all the GPUs of a node share that node's memory: bytes over it (<= 0 fits).
int64_t host_memory_overflow(const MemoryEstimate& e, const ClusterSpec& cluster) {
  int64_t largest = 0;
  for (const RankMemory& r : e.ranks) largest = std::max(largest, r.host_total);
  return largest * cluster.gpus_per_node - cluster.host_memory_bytes_per_node;
}

// Counts a rejection; describes it (a string, built only then) when it is the closest miss so far.
template <typename Describe>
void note_rejection(Rejection& rejection, const EstimateRequest& request, int64_t overflow, Describe describe) {
  ++rejection.count;
  if (rejection.closest_overflow_bytes < 0 || overflow < rejection.closest_overflow_bytes) {
    rejection.closest_overflow_bytes = overflow;
    rejection.closest_request = request;
    rejection.closest = describe();
  }
}

// The category that takes the most of the tightest rank's device memory.
MemoryCategory largest_category(const MemoryEstimate& e) {
  const RankMemory& tight = e.tightest();
  MemoryCategory largest = MemoryCategory::parameters;
  for (MemoryCategory c : kAllMemoryCategories) {
    if (tight.bytes[c].device > tight.bytes[largest].device) largest = c;
  }
  return largest;
}

std::string rejection_reason(const MemoryEstimate& e) {
  return "over GPU memory (largest: " + std::string(to_string(largest_category(e))) + ")";
}

// Same plan but for the micro-batch: to find each plan's largest micro-batch
// that fits. Full recompute of some blocks is a plan of its own, whose count
// of blocks follows the micro-batch (evaluate_fewer_recomputed).
auto plan_key(const EstimateRequest& r) {
  const auto& p = r.plugin;
  return std::make_tuple(p.runtime, p.kind, p.fsdp_strategy, p.zero_stage, p.cpu_offload, p.deepspeed.offload_param, p.gemini.placement_policy, p.gemini.offload_optim_frac,
                         p.gemini.offload_param_frac, r.layout.dp, r.layout.tp, r.layout.pp, r.layout.cp, r.layout.dp_replicate, r.layout.sequence_parallel, p.pp_schedule,
                         p.num_model_chunks, r.training.recompute, r.training.recompute_num_layers > 0);
}

// A row recomputing K blocks a chunk goes as far as the micro-batches that fit
// with K or fewer: recomputing more blocks only frees memory.
void fill_max_micro_batch(std::vector<Candidate>& fitted) {
  std::map<decltype(plan_key(EstimateRequest{})), std::vector<std::pair<int64_t, int64_t>>> fits;  // (blocks recomputed, micro-batch)
  for (const Candidate& c : fitted) fits[plan_key(c.request)].emplace_back(c.request.training.recompute_num_layers, c.request.training.micro_batch_size);
  for (Candidate& c : fitted) {
    const int64_t blocks = c.request.training.recompute_num_layers;
    int64_t best = 0;
    for (const auto& [fewest, micro_batch] : fits[plan_key(c.request)]) {
      if (fewest <= blocks) best = std::max(best, micro_batch);
    }
    c.max_micro_batch_that_fits = best;
  }
}

std::string explain(const std::vector<Candidate>& plans) {
  if (plans.empty()) return {};
  const Candidate& w = plans[0];
  char line[512];
  std::snprintf(line, sizeof line, "Best: %s at %.0f tokens/s (step %s, MFU %.0f%%), using %s of its GPUs' memory at most.",
                describe_plan(w.request).c_str(), w.simulation.tokens_per_s, format_seconds(w.simulation.step_time_s).c_str(),
                100 * w.simulation.mfu, format_bytes(w.peak_device_bytes()).c_str());
  std::string text = line;
  if (plans.size() < 2) return text + " No other plan fits.";
  const Candidate& r = plans[1];
  const StepBreakdown& a = w.simulation.breakdown;
  const StepBreakdown& b = r.simulation.breakdown;
  // Name the part of the step that differs most.
  struct Part {
    const char* name;
    double winner, runner_up;
  };
  const Part parts[] = {{"compute", a.forward_s + a.backward_s, b.forward_s + b.backward_s}, {"recompute", a.recompute_s, b.recompute_s},
                        {"exposed communication", a.communication_s, b.communication_s}, {"offload", a.offload_s, b.offload_s},
                        {"optimizer", a.optimizer_s, b.optimizer_s}, {"pipeline bubble", a.bubble_s, b.bubble_s}};
  // Name what costs the runner-up the most, and what it gains back, in seconds;
  // a difference under 0.1% of the step ("0.0 µs less optimizer") explains nothing.
  const double noticeable_s = 1e-3 * w.simulation.step_time_s;
  const Part* worse = nullptr;
  const Part* better = nullptr;
  for (const Part& part : parts) {
    const double delta = part.runner_up - part.winner;
    if (std::abs(delta) < noticeable_s) continue;
    if (delta > 0 && (!worse || delta > worse->runner_up - worse->winner)) worse = &part;
    if (delta < 0 && (!better || delta < better->runner_up - better->winner)) better = &part;
  }
  const double slower = 1 - r.simulation.tokens_per_s / w.simulation.tokens_per_s;
  std::snprintf(line, sizeof line, " Runner-up: %s at %.0f tokens/s", describe_plan(r.request).c_str(), r.simulation.tokens_per_s);
  text += line;
  if (slower < 0.005) {
    const std::string memory = format_bytes(r.peak_device_bytes()) + " against " + format_bytes(w.peak_device_bytes());
    if (r.peak_device_bytes() < w.peak_device_bytes()) return text + ", as fast within 0.5% and lighter on memory: " + memory + ".";
    return text + ", as fast within 0.5%, but needs " + memory + ".";
  }
  std::snprintf(line, sizeof line, ", %.1f%% slower", 100 * slower);
  text += line;
  if (worse) text += ": " + format_seconds(worse->runner_up - worse->winner) + " more " + worse->name;
  if (better) text += std::string(worse ? ", " : ": ") + format_seconds(better->winner - better->runner_up) + " less " + better->name;
  return text + ".";
}

Result<PlanSearchResult> search_plans_impl(const Model& model, const PlanRequest& p, SearchProgress* progress = nullptr);

// When even a larger cluster fits nothing: its closest miss and what takes
// its memory. Activations and logits grow with the tokens of a micro-batch,
// which no layout divides below one sample (tensor and sequence parallelism
// aside); model states that more GPUs do not shard point at the filters.
std::string why_nothing_fits(const Model& model, const PlanRequest& bigger, const PlanSearchResult& found) {
  const EstimateRequest& closest = *found.closest;
  auto memory = estimate_memory(model, bigger.cluster.gpu, closest);
  const MemoryCategory largest = memory ? largest_category(memory.value()) : MemoryCategory::activations;
  std::string text = "no plan fits even on " + str(bigger.cluster.world_size()) + " GPUs: the closest there, " + describe_plan(closest) + ", is " +
                     format_bytes(found.closest_overflow_bytes) + " over, most of it " + std::string(to_string(largest));
  if (largest == MemoryCategory::activations || largest == MemoryCategory::logits) {
    return text + ", which grows with the " + str(bigger.seq_len) + " tokens of a sample; use a shorter --seq";
  }
  std::string filters;  // what the larger search kept of the request's filters
  if (!bigger.plugins.empty()) filters += " --plugin " + std::string(enum_name(closest.plugin.kind));
  if (!bigger.recompute.empty()) filters += " --recompute " + std::string(enum_name(closest.training.recompute));
  if (bigger.micro_batch_size > 0) filters += " --micro-batch " + str(bigger.micro_batch_size);
  if (bigger.zero_stage >= 0) filters += " --zero-stage " + std::to_string(bigger.zero_stage);
  return text + (filters.empty() ? "" : "; more GPUs do not shard it under" + filters + ": drop or change that filter");
}

// What the candidates tried of full recompute, offload and micro-batch 1 ("full
// recompute and micro-batch 1 were tried"), and what the search left out, with the
// filter that did: --recompute, --micro-batch, or the plugins and runtime (Megatron-Core
// offloads nothing; DDP and tensor or pipeline layouts neither).
std::string memory_savers_tried(const PlanRequest& p, const PlanSearchResult& result) {
  std::vector<std::string> tried, left_out;
  (result.tried_full_recompute ? tried : left_out).push_back("full recompute");
  (result.tried_offload ? tried : left_out).push_back("CPU offload");
  (result.tried_micro_batch_one ? tried : left_out).push_back("micro-batch 1");
  const auto joined = [](const std::vector<std::string>& items) {
    std::string text;
    for (size_t i = 0; i < items.size(); ++i) text += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
    return text;
  };
  std::string text = tried.empty() ? std::string() : joined(tried) + (tried.size() == 1 ? " was tried" : " were tried");
  if (left_out.empty()) return text;
  std::string filters;  // the filters of the request that can leave them out
  if (!p.recompute.empty()) filters += " --recompute";
  if (p.micro_batch_size > 0) filters += " --micro-batch";
  if (!p.plugins.empty() || p.tp > 0 || p.pp > 0) filters += " --plugin/--tp/--pp";
  if (p.runtime != Runtime::colossalai) filters += " --runtime";
  return text + (text.empty() ? "" : "; ") + joined(left_out) + (left_out.size() == 1 ? " was" : " were") + " not among the candidates" +
         (filters.empty() ? "" : " (filters:" + filters + ")");
}

// When nothing fits: the closest miss, then the smallest change that fits among
// more GPUs and a shorter sequence. What the candidates tried of recompute,
// offload and micro-batch 1 is named as tried, not suggested.
std::vector<std::string> suggest(const Model& model, const PlanRequest& p, const PlanSearchResult& result) {
  std::vector<std::string> out;
  if (result.closest) {
    out.push_back("closest: " + describe_plan(*result.closest) + " is " + format_bytes(result.closest_overflow_bytes) + " over; " +
                  memory_savers_tried(p, result));
  }
  bool found_more_gpus = false;
  std::string largest_miss;  // why the largest cluster that had candidates fits none
  for (int64_t factor = 2; factor <= 64 && !found_more_gpus; factor *= 2) {
    PlanRequest bigger = p;
    const int64_t gpus = p.cluster.world_size() * factor;
    bigger.cluster.num_nodes = gpus / bigger.cluster.gpus_per_node;
    if (bigger.cluster.num_nodes == 0) bigger.cluster.gpus_per_node = gpus;
    bigger.cluster.num_nodes = std::max<int64_t>(1, bigger.cluster.num_nodes);
    bigger.dp = bigger.tp = bigger.pp = 0;
    auto found = search_plans_impl(model, bigger);
    if (found && !found->plans.empty()) {
      const Candidate& w = found->plans.front();
      out.push_back("with " + str(gpus) + " GPUs: " + describe_plan(w.request) + " fits (" + format_bytes(w.memory.tightest().margin) +
                    " to spare, " + std::to_string(static_cast<int64_t>(w.simulation.tokens_per_s)) + " tokens/s)");
      found_more_gpus = true;
    } else if (found && found->closest) {
      largest_miss = why_nothing_fits(model, bigger, found.value());
    }
  }
  if (p.seq_len >= 256) {
    PlanRequest shorter = p;
    shorter.seq_len = p.seq_len / 2;
    auto found = search_plans_impl(model, shorter);
    if (found && !found->plans.empty()) {
      out.push_back("with --seq " + str(shorter.seq_len) + ": " + describe_plan(found->plans.front().request) + " fits on these GPUs");
    }
  }
  if (!found_more_gpus) {
    out.push_back(!largest_miss.empty() ? largest_miss
                                        : "no plan fits, and on 2 to 64 times as many GPUs --global-batch " + str(p.global_batch_size) +
                                              " gives no layout whole sequences on every data-parallel rank and a micro-batch per "
                                              "pipeline stage; raise --global-batch");
  }
  return out;
}

}  // namespace

void apply_shared_training(const PlanRequest& p, TrainingOptions& t) {
  t.precision = p.precision;
  t.optimizer = p.optimizer;
  t.activation_profile = p.activation_profile;
  t.transformers_version = p.transformers_version;
  t.torch_compile = p.torch_compile;
  t.seq_len = p.seq_len;
}

int64_t Candidate::peak_device_bytes() const {
  int64_t peak = 0;
  for (const RankMemory& r : memory.ranks) peak = std::max(peak, r.device_total);
  return peak;
}

std::string describe_plan(const EstimateRequest& r) {
  const auto& p = r.plugin;
  std::string text(enum_name(p.kind));
  switch (p.kind) {
    case PluginKind::torch_ddp: break;
    case PluginKind::torch_fsdp: text += " " + std::string(enum_name(p.fsdp_strategy)) + (p.cpu_offload ? " + cpu offload" : ""); break;
    case PluginKind::low_level_zero:
      text += " stage " + std::to_string(p.effective_zero_stage()) + (p.cpu_offload ? " + cpu offload" : "") +
              (p.deepspeed.offload_param ? " + param offload" : "");
      break;
    case PluginKind::gemini: {
      char g[96];
      std::snprintf(g, sizeof g, " %s", std::string(enum_name(p.gemini.placement_policy)).c_str());
      text += g;
      if (p.gemini.placement_policy == GeminiPlacement::static_placement) {
        std::snprintf(g, sizeof g, " (offload_optim_frac %.3g, offload_param_frac %.3g)", p.gemini.offload_optim_frac, p.gemini.offload_param_frac);
        text += g;
      }
      break;
    }
    case PluginKind::hybrid_parallel:
      text += " dp " + str(r.layout.dp) + " × tp " + str(r.layout.tp) + " × pp " + str(r.layout.pp) + (r.layout.cp > 1 ? " × cp " + str(r.layout.cp) : "") +
              (r.layout.sequence_parallel ? " + sp" : "") +
              ", zero " + std::to_string(p.effective_zero_stage());
      if (p.pp_schedule == PipelineSchedule::interleaved) text += ", interleaved × " + str(p.num_model_chunks);
      if (p.deepspeed_pipeline()) text += ", DeepSpeed's pipeline engine";
      break;
  }
  if (p.kind != PluginKind::hybrid_parallel) text += ", dp " + str(r.layout.dp) + (r.layout.cp > 1 ? " × cp " + str(r.layout.cp) : "");
  if (r.layout.dp_replicate > 1) text += " (" + str(r.layout.dp_replicate) + " replicas × " + str(r.layout.shard_ranks()) + ")";
  text += ", recompute " + describe_recompute(r) + ", micro-batch " + str(r.training.micro_batch_size) + " × " +
          str(r.training.num_micro_batches);
  return text;
}

namespace {

// Whether the runtime recomputes the attention core alone (Korthikanti's
// selective): Megatron-LM (--recompute-granularity selective) and Tessera's
// engine (its tessera profiles). ColossalAI's plugins and DeepSpeed run Hugging
// Face's modules, which recompute whole blocks (gradient checkpointing) or
// nothing, so a selective row of theirs would be one no script runs: their
// exports write it as recompute none (DeepSpeed) or only turn on the fused
// attention the flash profile already assumes (ColossalAI).
bool runs_selective_recompute(const PlanRequest& p) {
  return p.runtime == Runtime::megatron || is_tessera_engine(p.activation_profile);
}

// The recompute modes searched when --recompute names none: none, selective
// where the runtime runs it, and full; under torchtitan none and full, and its
// op-level policy where the model is the Llama block that policy follows (check_op_selective).
std::vector<RecomputeMode> searched_recompute_modes(const Model& model, const PlanRequest& p) {
  if (p.runtime != Runtime::torchtitan) {
    std::vector<RecomputeMode> modes(kSearchedRecomputeModes.begin(), kSearchedRecomputeModes.end());
    if (!runs_selective_recompute(p)) std::erase(modes, RecomputeMode::selective);
    return modes;
  }
  std::vector<RecomputeMode> modes{RecomputeMode::none, RecomputeMode::full};
  if (p.activation_profile == ActivationProfile::flash && is_torchtitan_llama_block(model.config)) modes.push_back(RecomputeMode::op_selective);
  return modes;
}

}  // namespace

std::vector<EstimateRequest> plan_candidates(const Model& model, const PlanRequest& p) {
  const std::vector<RecomputeMode> modes = p.recompute.empty() ? searched_recompute_modes(model, p) : p.recompute;
  std::vector<EstimateRequest> out;
  for (EstimateRequest base : plugin_templates(model, p)) {
    // --dp-replicate: only the layouts that shard, each over replicas of dp/R ranks.
    base.layout.dp_replicate = p.dp_replicate;
    if (!check_hybrid_sharding(base)) continue;
    const int64_t dp = base.layout.dp;
    if (p.global_batch_size % dp != 0) continue;  // every data-parallel rank takes an equal share
    const int64_t per_rank = p.global_batch_size / dp;
    for (int64_t b : divisors(per_rank)) {
      if (p.micro_batch_size > 0 && b != p.micro_batch_size) continue;
      for (RecomputeMode mode : modes) {
        EstimateRequest r = base;
        r.training.micro_batch_size = b;
        r.training.num_micro_batches = per_rank / b;
        r.training.recompute = mode;
        r.training.recompute_num_layers = mode == RecomputeMode::full ? p.recompute_num_layers : 0;
        // Only schedules the runtime runs: interleaved micro-batches in groups of pp, 1F1B at least pp of them.
        if (!check_pipeline_schedule(model, r) || !check_fsdp_offload_accumulation(r)) continue;
        out.push_back(r);
      }
    }
  }
  return out;
}


namespace {

// Sequence parallelism only divides activations (in every profile but the
// engine's, whose gathered buffers it adds): a candidate over memory with it
// is over memory without it, so that twin is not estimated.
using TwinKey = std::pair<decltype(plan_key(EstimateRequest{})), int64_t>;
TwinKey twin_key(EstimateRequest r) {
  r.layout.sequence_parallel = true;
  return {plan_key(r), r.training.micro_batch_size};
}

// A row of the result: a plan but for its micro-batch and chunk count.
using RowKey = decltype(plan_key(EstimateRequest{}));
RowKey row_key(EstimateRequest r) {
  r.plugin.num_model_chunks = 0;
  return plan_key(r);
}

// The 1F1B layout that an interleaved candidate runs in chunks, for its bubble.
TwinKey one_f_one_b_twin_key(EstimateRequest r) {
  r.plugin.pp_schedule = PipelineSchedule::one_f_one_b;
  r.plugin.num_model_chunks = 1;
  return {plan_key(r), r.training.micro_batch_size};
}

// Whether `r` saves memory by full recompute, by keeping states on the host, or by micro-batch 1.
void note_memory_savers(const EstimateRequest& r, PlanSearchResult& result) {
  const PluginOptions& plugin = r.plugin;
  const bool gemini_offloads = plugin.kind == PluginKind::gemini &&
                               (plugin.gemini.placement_policy == GeminiPlacement::cpu || plugin.gemini.placement_policy == GeminiPlacement::auto_placement ||
                                plugin.gemini.offload_optim_frac > 0 || plugin.gemini.offload_param_frac > 0);
  result.tried_full_recompute |= r.training.recompute == RecomputeMode::full;
  result.tried_offload |= plugin.cpu_offload || plugin.deepspeed.offload_param || gemini_offloads;
  result.tried_micro_batch_one |= r.training.micro_batch_size == 1;
}

Result<PlanSearchResult> search_plans_impl(const Model& model, const PlanRequest& p, SearchProgress* progress) {
  PlanSearchResult result;
  SimulationMemo memo;
  std::set<TwinKey> over_memory_with_sp;
  std::map<TwinKey, double> one_f_one_b_bubbles;  // simulated 1F1B pipelines' bubbles (seconds)
  std::optional<Error> failure;
  const bool sp_only_divides = !is_tessera_engine(p.activation_profile);
  // Estimates `r` and, where it fits, simulates it: the index of its plan, or -1.
  const auto evaluate = [&](const EstimateRequest& r) -> int64_t {
    if (sp_only_divides && r.layout.tp > 1 && !r.layout.sequence_parallel && over_memory_with_sp.contains(twin_key(r))) return -1;
    ++result.candidates_evaluated;
    note_memory_savers(r, result);
    auto memory = estimate_memory(model, p.cluster.gpu, r, memo);
    if (!memory) {
      ++result.rejected["invalid: " + memory.error().message.substr(0, 60)].count;
      return -1;
    }
    if (!memory->fits()) {
      if (r.layout.sequence_parallel) over_memory_with_sp.insert(twin_key(r));
      const int64_t overflow = -memory->tightest().margin;
      note_rejection(result.rejected[rejection_reason(memory.value())], r, overflow, [&] {
        const std::string verdict = verdict_line(memory.value());  // "DOES NOT FIT: ranks ... need ..."
        return describe_plan(r) + ": " + verdict.substr(verdict.find(": ") + 2);
      });
      if (!result.closest || overflow < result.closest_overflow_bytes) {
        result.closest = r;
        result.closest_overflow_bytes = overflow;
      }
      return -1;
    }
    if (const int64_t host_overflow = host_memory_overflow(memory.value(), p.cluster); host_overflow > 0) {
      note_rejection(result.rejected["over host memory (offloaded states of a node's GPUs)"], r, host_overflow, [&] {
        const bool gemini_pins = colossalai_pins_every_chunk(r.plugin, r.training);
        return describe_plan(r) + ": a node's GPUs offload " + format_bytes(host_overflow + p.cluster.host_memory_bytes_per_node) +
               " to " + format_bytes(p.cluster.host_memory_bytes_per_node) + " of host memory" +
               (gemini_pins ? " (with Gemini's pinned copy of every chunk; --pin-memory false drops it)" : "");
      });
      return -1;
    }
    auto simulation = simulate_step(model, p.cluster, r, memory.value(), p.simulation, memo);
    if (!simulation) {
      failure = simulation.error();
      return -1;
    }
    if (r.layout.pp > 1 && r.plugin.pp_schedule == PipelineSchedule::one_f_one_b) {
      one_f_one_b_bubbles[one_f_one_b_twin_key(r)] = simulation->breakdown.bubble_s;
    }
    result.plans.push_back(Candidate{r, std::move(memory).value(), std::move(simulation).value(), 0});
    return static_cast<int64_t>(result.plans.size()) - 1;
  };
  // An interleaved layout at the chunk count that its 1F1B twin predicts
  // fastest (interleaving_choice.h), or the next best predicted that fits;
  // without a simulated twin (it did not fit, and interleaving keeps more in
  // flight) at the candidate's own count, the largest.
  const auto evaluate_interleaved = [&](EstimateRequest r) -> int64_t {
    const auto twin = one_f_one_b_bubbles.find(one_f_one_b_twin_key(r));
    if (twin == one_f_one_b_bubbles.end()) return evaluate(r);
    for (int64_t v : search_detail::chunk_counts_by_predicted_bubble(interleaved_chunk_counts(model.config.num_layers, r.layout.pp), r.layout.pp,
                                                                     twin->second, pipeline_send_seconds(model, p.cluster, r))) {
      r.plugin.num_model_chunks = v;
      if (const int64_t plan = evaluate(r); plan >= 0 || failure) return plan;
    }
    return -1;
  };
  // A plan that fits with every block recomputed, tried again with the fewest
  // blocks per chunk recomputed whole that fit where the runtime can recompute
  // only some (recompute_blocks.h): fewer run faster and keep more. Memory
  // falls as the count grows, so a bisection finds it; where recompute none
  // fits, that plan is faster still and nothing is added.
  const auto evaluate_fewer_recomputed = [&](EstimateRequest r) {
    std::vector<int64_t> counts = partial_recompute_counts(model.config, r);
    if (counts.empty()) return;
    counts.insert(counts.begin(), 0);  // recompute none
    const auto fits = [&](int64_t blocks) {
      EstimateRequest probe = r;
      probe.training.recompute = blocks == 0 ? RecomputeMode::none : RecomputeMode::full;
      probe.training.recompute_num_layers = blocks;
      auto memory = estimate_memory(model, p.cluster.gpu, probe, memo);
      return memory && memory->fits();
    };
    size_t low = 0, high = counts.size();  // the first count that fits lies in [low, high]; high: none of them
    while (low < high) {
      const size_t mid = (low + high) / 2;
      if (fits(counts[mid])) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    if (low == 0 || low == counts.size()) return;
    r.training.recompute_num_layers = counts[low];
    evaluate(r);
  };
  const std::vector<EstimateRequest> candidates = plan_candidates(model, p);
  if (progress) progress->candidates = static_cast<int64_t>(candidates.size());
  for (const EstimateRequest& r : candidates) {
    if (progress) {
      if (progress->stop) return make_error(ErrorCode::cancelled, "the plan search was cancelled");
      progress->done.fetch_add(1, std::memory_order_relaxed);
    }
    const int64_t plan = r.plugin.pp_schedule == PipelineSchedule::interleaved ? evaluate_interleaved(r) : evaluate(r);
    if (failure) return *failure;
    if (plan >= 0 && p.recompute.empty() && r.training.recompute == RecomputeMode::full) {
      evaluate_fewer_recomputed(result.plans[static_cast<size_t>(plan)].request);
      if (failure) return *failure;
    }
  }
  // The prediction leaves out only what favours fewer chunks (a chunk that
  // holds the head or the embedding outweighs the others): each row's fastest
  // interleaved plan is tried again at the next smaller counts while they run faster.
  std::map<RowKey, size_t> fastest_interleaved;
  for (size_t k = 0; k < result.plans.size(); ++k) {
    if (result.plans[k].request.plugin.pp_schedule != PipelineSchedule::interleaved) continue;
    const auto [row, added] = fastest_interleaved.emplace(row_key(result.plans[k].request), k);
    if (!added && result.plans[k].simulation.tokens_per_s > result.plans[row->second].simulation.tokens_per_s) row->second = k;
  }
  for (const auto& [row, k] : fastest_interleaved) {
    EstimateRequest r = result.plans[k].request;
    double fastest = result.plans[k].simulation.tokens_per_s;
    const std::vector<int64_t> counts = interleaved_chunk_counts(model.config.num_layers, r.layout.pp);
    for (auto i = std::find(counts.begin(), counts.end(), r.plugin.num_model_chunks); i != counts.begin();) {
      r.plugin.num_model_chunks = *--i;
      const int64_t plan = evaluate(r);
      if (failure) return *failure;
      if (plan < 0 || result.plans[static_cast<size_t>(plan)].simulation.tokens_per_s <= fastest) break;
      fastest = result.plans[static_cast<size_t>(plan)].simulation.tokens_per_s;
    }
  }
  if (p.pp_schedule) {
    std::erase_if(result.plans, [&](const Candidate& c) { return c.request.layout.pp > 1 && c.request.plugin.pp_schedule != *p.pp_schedule; });
  }
  result.candidates_fitting = static_cast<int64_t>(result.plans.size());
  fill_max_micro_batch(result.plans);
  std::stable_sort(result.plans.begin(), result.plans.end(), [](const Candidate& a, const Candidate& b) {
    if (a.simulation.tokens_per_s != b.simulation.tokens_per_s) return a.simulation.tokens_per_s > b.simulation.tokens_per_s;
    return a.peak_device_bytes() < b.peak_device_bytes();
  });
  // One row per plan: its fastest micro-batch (the others differ only in memory,
  // and max_micro_batch_that_fits says how far the micro-batch can go), and
  // interleaved, its fastest chunk count.
  std::set<RowKey> seen;
  std::erase_if(result.plans, [&](const Candidate& c) { return !seen.insert(row_key(c.request)).second; });
  result.explanation = explain(result.plans);
  return result;
}

}  // namespace

Result<PlanSearchResult> search_plans(const Model& model, const PlanRequest& p, SearchProgress* progress) {
  if (Status s = validate_plan_request(model, p); !s) return s.error();
  if (Status s = validate_plan_filters(model, p); !s) return s.error();
  auto result = search_plans_impl(model, p, progress);
  if (result && result->plans.empty()) result.value().suggestions = suggest(model, p, result.value());
  return result;
}

}  // namespace tessera::planner
