#include "plan_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <ostream>
#include <vector>

#include "cli_app.h"
#include "cli_util.h"
#include "estimate_options.h"
#include "commands.h"
#include "tessera/planner/export.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/text_util.h"

namespace tessera::cli {
namespace {

using namespace tessera::planner;

Result<PlanRequest> make_request(const PlanOptions& o) {
  PlanRequest r;
  Result<ClusterSpec> cluster = o.cluster.empty() ? [&]() -> Result<ClusterSpec> {
    auto gpu = load_gpu(o.gpu);
    if (!gpu) return gpu.error();
    return make_cluster(gpu.value(), o.gpus, o.gpus_per_node, o.inter_node_gbps);
  }()
                                                  : load_cluster(o.cluster);
  if (!cluster) return cluster.error();
  r.cluster = std::move(cluster).value();
  r.global_batch_size = o.global_batch;
  r.seq_len = o.seq;
  r.dp = o.dp;
  r.tp = o.tp;
  r.pp = o.pp;
  r.cp = o.cp;
  r.dp_replicate = o.dp_replicate;
  r.micro_batch_size = o.micro_batch;
  r.zero_stage = o.zero_stage;
  r.chunk_size = o.chunk_size;
  r.pin_memory = o.pin_memory;
  r.torch_compile = o.torch_compile;
  r.grad_reduce_in_bf16 = o.grad_reduce_in_bf16;
  r.fp8_param_gather = o.fp8_param_gather;
  r.fused_rmsnorm = o.fused_rmsnorm;
  r.compile_model_only = o.compile_model_only;
  r.recompute_num_layers = o.recompute_num_layers;
  for (Status s : {parse_choice("--precision", o.precision, r.precision), parse_choice("--optimizer", o.optimizer, r.optimizer),
                   parse_choice("--runtime", o.runtime, r.runtime),
                   parse_choice("--activation-profile", o.activation_profile, r.activation_profile),
                   parse_choice("--sequence-parallel", o.sequence_parallel, r.sequence_parallel),
                   parse_memory_headroom(o.memory_headroom, r.assumptions)}) {
    if (!s) return s.error();
  }
  if (Status s = parse_transformers_version_option(o.transformers_version, r.activation_profile, r.transformers_version); !s) return s.error();
  if (!o.plugin.empty()) {
    PluginKind kind{};
    if (Status s = parse_choice("--plugin", o.plugin, kind); !s) return s.error();
    r.plugins = {kind};
  }
  if (!o.pp_schedule.empty()) {
    PipelineSchedule schedule{};
    if (Status s = parse_choice("--pp-schedule", o.pp_schedule, schedule); !s) return s.error();
    r.pp_schedule = schedule;
  }
  if (!o.recompute.empty()) {
    RecomputeMode mode{};
    if (Status s = parse_choice("--recompute", o.recompute, mode); !s) return s.error();
    r.recompute = {mode};
  }
  if (o.top <= 0) return make_error(ErrorCode::invalid_argument, "--top must be a positive integer");
  return r;
}

// The table's title names the runtime whose model states the plans count.
std::string runtime_title(Runtime runtime) {
  switch (runtime) {
    case Runtime::colossalai: return "ColossalAI's plugins";
    case Runtime::megatron: return "Megatron-Core";
    case Runtime::torchtitan: return "torchtitan's FSDP2";
    case Runtime::deepspeed: return "DeepSpeed ZeRO-3 and its pipeline engine";
  }
  return "";
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

// The exports that run a plan of `runtime`: its own target, and for ColossalAI's
// states DeepSpeed's config too (its ZeRO plans).
std::vector<ExportTarget> runtime_targets(Runtime runtime) {
  switch (runtime) {
    case Runtime::colossalai: return {ExportTarget::colossalai, ExportTarget::deepspeed};
    case Runtime::deepspeed: return {ExportTarget::deepspeed};
    case Runtime::megatron: return {ExportTarget::megatron};
    case Runtime::torchtitan: return {ExportTarget::torchtitan};
  }
  return {};
}

// The shown plans that no export of their runtime writes, grouped by the first
// target's refusal: "plans 1, 3: --to colossalai: ...". A plan is for running,
// so one that no script or config runs says so beside the table, not first at export.
std::vector<std::string> unexported_plans(const nlohmann::json& document, Runtime runtime, int top) {
  auto file = parse_plan_file(document.dump(), "plan.json");
  if (!file) return {};
  std::vector<std::pair<std::string, std::string>> reasons;  // refusal, the plans it refuses (in order)
  for (size_t i = 0; i < file->plans.size() && static_cast<int>(i) < top; ++i) {
    std::optional<std::string> refusal;
    for (ExportTarget target : runtime_targets(runtime)) {
      auto exported = export_plan(file.value(), i, target);
      if (exported) {
        refusal.reset();
        break;
      }
      if (!refusal) refusal = exported.error().message;
    }
    if (!refusal) continue;
    auto same = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == *refusal; });
    if (same == reasons.end()) same = reasons.insert(reasons.end(), {*refusal, ""});
    same->second += (same->second.empty() ? "" : ", ") + std::to_string(i + 1);
  }
  std::vector<std::string> lines;
  for (const auto& [refusal, plans] : reasons) {
    const bool one = plans.find(',') == std::string::npos;
    lines.push_back((one ? "plan " : "plans ") + plans + (one ? " exports" : " export") + " nowhere yet: " + refusal);
  }
  return lines;
}

void print_table(const Model& model, const PlanRequest& r, const PlanSearchResult& result, int top, const std::vector<std::string>& unexported,
                 std::ostream& out) {
  out << "Tessera plan: " << model.config.name << " (" << format_count(model.parameter_count) << " parameters) on " << r.cluster.world_size()
      << " × " << r.cluster.gpu.name << " (" << r.cluster.num_nodes << " node" << (r.cluster.num_nodes > 1 ? "s" : "") << " × "
      << r.cluster.gpus_per_node << "), global batch " << r.global_batch_size << " × seq " << r.seq_len << ", "
      << enum_name(r.precision) << ", " << enum_name(r.optimizer) << ", " << runtime_title(r.runtime) << ", activation profile " << enum_name(r.activation_profile)
      << (runs_hugging_face_modules(r.activation_profile) ? " (transformers " + to_string(r.transformers_version) + ")" : "")
      << (r.torch_compile ? ", torch.compile" : "") << (r.grad_reduce_in_bf16 ? ", bf16 gradient buffer (--grad-reduce-in-bf16)" : "")
      << (r.fp8_param_gather ? ", FP8 weights (--fp8-param-gather)" : "") << (r.fused_rmsnorm ? ", Triton RMSNorm (--fused-rmsnorm)" : "")
      << (r.compile_model_only ? ", the loss eager (--compile-model-only)" : "");
  if (const int64_t headroom = r.assumptions.memory_headroom(r.cluster.gpu.memory_bytes); headroom > 0) {
    out << ", " << format_bytes(headroom) << " left free per GPU";
  }
  out << "\n";
  if (is_fp8(r.precision)) {
    out << "Note: " << kFp8ThroughputCaveat << "\n";
  }
  out << "\n";
  if (!result.plans.empty()) {
    // FP8 runs state MFU on the bf16 peak, as published FP8 tables do (fp8.h); the column says so.
    const std::string basis = mfu_basis(r.precision);  // " of the bf16 peak", or nothing
    out << " #  plan\n    peak memory   step time    tokens/s    MFU" << (basis.empty() ? "" : " (" + basis.substr(1) + ")")
        << "   largest micro-batch that fits\n";
  }
  for (size_t i = 0; i < result.plans.size() && static_cast<int>(i) < top; ++i) {
    const Candidate& c = result.plans[i];
    char row[160];
    std::snprintf(row, sizeof row, "    %-13s %-12s %10.0f  %4.1f%%   %lld\n", format_bytes(c.peak_device_bytes()).c_str(),
                  (fixed(c.simulation.step_time_s, 3) + " s").c_str(), c.simulation.tokens_per_s, 100 * c.simulation.mfu,
                  static_cast<long long>(c.max_micro_batch_that_fits));
    out << (i + 1 < 10 ? " " : "") << (i + 1) << "  " << describe_plan(c.request);
    const auto& l = c.request.layout;
    const int64_t virtual_stages = l.pp * c.request.plugin.model_chunks();
    if (model.config.num_layers % virtual_stages != 0) {
      out << ", layers per stage " << describe_layer_split(static_cast<int>(model.config.num_layers), static_cast<int>(l.pp),
                                                            static_cast<int>(c.request.plugin.model_chunks()));
    }
    out << "\n" << row;
  }
  if (!unexported.empty()) out << "\n";
  for (const std::string& line : unexported) out << "  " << line << "\n";
  int64_t rejected = 0;
  for (const auto& [reason, rejection] : result.rejected) rejected += rejection.count;
  out << "\nSearched " << result.candidates_evaluated << " candidates: " << result.candidates_fitting << " fit (" << result.plans.size()
      << " distinct plans), " << rejected << " rejected";
  for (const auto& [reason, rejection] : result.rejected) {
    out << "\n  " << rejection.count << " × " << reason;
    if (!rejection.closest.empty()) out << "\n      closest: " << rejection.closest;
  }
  out << "\n\n";
  if (!result.explanation.empty()) out << result.explanation << "\n";
  if (result.plans.empty()) {
    out << "NOTHING FITS.\n";
    for (const std::string& s : result.suggestions) out << "  - " << s << "\n";
  }
}

}  // namespace

void add_plan_options(CLI::App& c, PlanOptions& o) {
  c.add_option("--model", o.model, "Shipped model name or path of a Hugging Face config.json")->required();
  auto* cluster = c.add_option("--cluster", o.cluster, "Shipped cluster (data/hardware/clusters) or a cluster file; replaces the four options below");
  c.add_option("--gpu", o.gpu, "GPU profile name")->capture_default_str()->excludes(cluster);
  c.add_option("--gpus", o.gpus, "Number of GPUs")->capture_default_str()->excludes(cluster);
  c.add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node")->capture_default_str()->excludes(cluster);
  c.add_option("--inter-node-gbps", o.inter_node_gbps, "Network bandwidth per GPU between nodes, Gbit/s")->capture_default_str()->excludes(cluster);
  c.add_option("--global-batch", o.global_batch, "Sequences per optimizer step (fixed; gradient accumulation follows)")->required();
  c.add_option("--seq", o.seq, "Tokens per sequence")->capture_default_str();
  c.add_option("--precision", o.precision, "fp32, fp16, bf16 or fp8 (Transformer Engine under --runtime megatron; GPUs with FP8 tensor cores)")->capture_default_str();
  c.add_option("--optimizer", o.optimizer, "adam, adamw, sgd or sgd_momentum")->capture_default_str();
  c.add_option("--activation-profile", o.activation_profile, "flash (fused attention), hf / hf_eager / hf_autocast (Hugging Face models run eagerly, measured), megatron (Korthikanti 2022), tessera (our engine on the CPU) or tessera_gpu (its GPU step)")->capture_default_str();
  c.add_option("--transformers-version", o.transformers_version, kTransformersVersionHelp);
  c.add_flag("--torch-compile", o.torch_compile, kTorchCompileHelp);
  c.add_option("--memory-headroom", o.memory_headroom, "Memory every GPU must leave free: GiB (e.g. 2) or a percentage (e.g. 10%)")
      ->capture_default_str();
  c.add_option("--runtime", o.runtime,
               "Whose model states the plans count, and so what the search tries: colossalai (its five plugins), megatron (Megatron-Core: "
               "hybrid_parallel, ZeRO stage 0 or 1 = its distributed optimizer), torchtitan (FSDP2 over --dp and --cp, op_selective recompute "
               "for Llama-shaped models) or deepspeed (ZeRO-3, with the optimizer and then the parameters offloaded)")
      ->capture_default_str();
  c.add_option("--plugin", o.plugin, "Only this plugin");
  c.add_option("--recompute", o.recompute, "Only this recompute mode");
  c.add_option("--recompute-num-layers", o.recompute_num_layers,
               "With --recompute full: every plan recomputes only the first N blocks of each model chunk whole (Megatron-LM's "
               "--recompute-method block). Without it and without --recompute, the fewest blocks that fit are tried too where the runtime can run them (megatron, torchtitan, colossalai's hybrid_parallel pipelines of Llama, Mistral and Qwen2)");
  c.add_option("--dp", o.dp, "Only this data-parallel size");
  c.add_option("--tp", o.tp, "Only this tensor-parallel size");
  c.add_option("--pp", o.pp, "Only this number of pipeline stages");
  c.add_option("--cp", o.cp,
               "Only this context-parallel size (ring attention; hybrid_parallel plans); 0 tries 1 and, from " + std::to_string(kLongSequence) +
                   " tokens, 2, 4 and 8");
  c.add_option("--dp-replicate", o.dp_replicate,
               "Hybrid sharding: only plans whose model states shard (FSDP, ZeRO), as this many replicas of dp/R ranks")
      ->capture_default_str();
  c.add_option("--micro-batch", o.micro_batch, "Only this micro-batch size");
  c.add_option("--zero-stage", o.zero_stage, "Only this ZeRO stage (3: --runtime deepspeed's)");
  c.add_option("--pp-schedule", o.pp_schedule, "Only pipelines of this schedule: 1f1b or interleaved");
  c.add_option("--chunk-size", o.chunk_size, "gemini: elements per chunk (0 = ColossalAI's search)")->capture_default_str();
  add_pin_memory_option(c, o.pin_memory, "");
  c.add_flag("--fused-rmsnorm", o.fused_rmsnorm, kFusedRmsnormHelp);
  c.add_flag("--compile-model-only", o.compile_model_only, kCompileModelOnlyHelp);
  c.add_flag("--grad-reduce-in-bf16", o.grad_reduce_in_bf16,
             "--runtime megatron: every plan keeps its main-gradient buffer in bf16, not fp32 (Megatron-LM --grad-reduce-in-bf16, NeMo's "
             "grad_sync_dtype bf16)");
  c.add_flag("--fp8-param-gather", o.fp8_param_gather,
             "--runtime megatron --precision fp8: every plan keeps Transformer Engine's weights in FP8 under the distributed optimizer "
             "(Megatron-LM --fp8-param-gather, NeMo's fp8_params)");
  c.add_option("--sequence-parallel", o.sequence_parallel, "With --tp above 1: on (divides activations), off, or both tried")->capture_default_str();
  c.add_option("--top", o.top, "Plans to print and write")->capture_default_str();
  c.add_option("--format", o.format, "table or json (the plan document on standard output)")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  c.add_option("--output,-o", o.output, "Where to write the plan document (default plan.json; under --format json, only where given)");
}

// Where the plan document goes: --output, else plan.json, except that --format
// json prints it instead unless --output is given. Empty: no file.
std::string plan_file_path(const PlanOptions& o) {
  if (!o.output.empty()) return o.output;
  return o.format == "json" ? std::string() : std::string("plan.json");
}

// A file at `path` that is not a plan document is the user's, not ours to replace.
Status check_replaceable(const std::string& path) {
  std::error_code ec;
  // Nothing there, or no regular file: the writer refuses a directory, device or symlink itself.
  if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) return Status::success();
  auto text = read_text_file(path, "--output", 16 << 20);
  const nlohmann::json doc = text ? nlohmann::json::parse(text.value(), nullptr, false) : nlohmann::json();
  if (doc.is_object() && doc.value("kind", nlohmann::json()) == "plan") return Status::success();
  return make_error(ErrorCode::invalid_argument, "--output " + path + ": the file there is not a plan document of tessera plan, so it is left as it is; "
                                                 "name another --output or move that file");
}

int run_plan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  const std::string path = plan_file_path(options);
  if (const planner::ReportFormat named = format_from_extension(path); !path.empty() && named != planner::ReportFormat::json && named != planner::ReportFormat::table) {
    return fail(err, "--output " + path + ": tessera plan writes the plan document, JSON; name it .json (a report of one plan: tessera estimate "
                     "--output FILE." + std::string(enum_name(named)) + ", or tessera-gui SESSION.json --export FILE." + std::string(enum_name(named)) + ")");
  }
  if (!path.empty()) {
    if (Status s = check_replaceable(path); !s) return fail(err, s.error().message);
  }
  auto model = load_model(options.model);
  if (!model) return fail(err, model.error().message);
  auto request = make_request(options);
  if (!request) return fail(err, request.error().message);
  auto result = search_plans(model.value(), request.value());
  if (!result) return fail(err, result.error().message);
  const nlohmann::json document = plan_document(model.value(), options.model, request.value(), result.value(), options.top);
  if (!path.empty()) {
    if (Status s = write_file_atomically(path, document.dump(2) + "\n"); !s) return fail(err, s.error().message);
  }
  if (options.format == "json") {
    out << document.dump(2) << "\n";
    if (!path.empty()) err << "wrote " << path << "\n";
  } else {
    print_table(model.value(), request.value(), result.value(), options.top, unexported_plans(document, request->runtime, options.top), out);
    out << "wrote " << path << "\n";
  }
  return kExitOk;
}

}  // namespace tessera::cli
