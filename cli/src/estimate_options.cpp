#include "estimate_options.h"

#include "cli_app.h"
#include "cli_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tessera::cli {
namespace {

using namespace tessera::planner;

Status mib_to_bytes(const char* option, double mib, int64_t& out, bool allow_negative_one) {
  if (allow_negative_one && mib == -1) {
    out = -1;
    return Status::success();
  }
  if (!(mib >= 0 && mib <= 1e9)) return make_error(ErrorCode::invalid_argument, std::string(option) + " must lie in [0, 1e9] MiB");
  out = static_cast<int64_t>(std::llround(mib * 1048576.0));
  return Status::success();
}

}  // namespace

Status parse_transformers_version_option(const std::string& text, ActivationProfile profile, TransformersVersion& out) {
  if (text.empty()) return Status::success();
  if (!runs_hugging_face_modules(profile)) {
    return make_error(ErrorCode::invalid_argument, "--transformers-version applies to the hf profiles (hf, hf_eager, hf_autocast), not --activation-profile " +
                                                       std::string(enum_name(profile)));
  }
  const auto version = parse_transformers_version(text);
  if (!version) return make_error(ErrorCode::invalid_argument, "--transformers-version '" + text.substr(0, 40) + "' is not a release X.Y (e.g. 4.32)");
  out = *version;
  return Status::success();
}

// What the file's extension names: md, csv, html (or .htm), json; table otherwise.
ReportFormat format_from_extension(const std::string& path) {
  for (const auto& entry : kReportFormatNames) {
    if (entry.value != ReportFormat::table && path.ends_with("." + std::string(entry.name))) return entry.value;
  }
  if (path.ends_with(".htm")) return ReportFormat::html;
  return ReportFormat::table;
}

Status EstimateOptions::finish() {
  TrainingOptions& t = request.training;
  PluginOptions& p = request.plugin;
  for (Status s : {parse_choice("--precision", precision, t.precision), parse_choice("--optimizer", optimizer, t.optimizer),
                   parse_choice("--recompute", recompute, t.recompute),
                   parse_choice("--activation-profile", activation_profile, t.activation_profile),
                   parse_choice("--runtime", runtime, p.runtime),
                   parse_choice("--pp-schedule", pp_schedule, p.pp_schedule),
                   parse_choice("--fsdp-strategy", fsdp_strategy, p.fsdp_strategy),
                   parse_choice("--placement", placement, p.gemini.placement_policy),
                   mib_to_bytes("--bucket-mb", bucket_mb, p.bucket_bytes, false),
                   mib_to_bytes("--reduce-bucket-m", reduce_bucket_m, p.reduce_bucket_numel, false),
                   mib_to_bytes("--cuda-context-mib", cuda_context_mib, request.assumptions.cuda_context_bytes, true),
                   mib_to_bytes("--nccl-mib", nccl_mib, request.assumptions.nccl_bytes_per_group, false),
                   mib_to_bytes("--cublas-workspace-mib", cublas_workspace_mib, request.assumptions.cublas_workspace_bytes, false),
                   parse_memory_headroom(memory_headroom, request.assumptions)}) {
    if (!s) return s;
  }
  // Without --plugin, the plugin of the runtime's model states (torch_ddp under colossalai).
  p.kind = runtime_plugin(p.runtime);
  if (!plugin.empty()) {
    if (Status s = parse_choice("--plugin", plugin, p.kind); !s) return s;
  }
  if (Status s = parse_transformers_version_option(transformers_version, t.activation_profile, t.transformers_version); !s) return s;
  if (format.empty()) {
    // Text under a .pdf name would not open as one: the PDF report is the desktop app's.
    std::string lower = output;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (lower.ends_with(".pdf")) {
      return make_error(ErrorCode::invalid_argument, "--output " + output + ": tessera estimate writes text, md, html, csv or json; a PDF report is "
                                                     "the desktop app's (tessera-gui SESSION.json --export FILE.pdf)");
    }
    format_value = format_from_extension(output);
  } else if (Status s = parse_choice("--format", format, format_value); !s) {
    return s;
  }
  return Status::success();
}

void add_pin_memory_option(CLI::App& c, bool& pin_memory, const std::string& also) {
  c.add_option("--pin-memory", pin_memory,
               "gemini: ColossalAI's pin_memory, on by its default enable_async_reduce=True: a pinned host copy of every chunk "
               "(false: enable_async_reduce=False)" + also)
      ->check(CLI::IsMember({"true", "false"}))
      ->default_str("true");
}

void add_estimate_options(CLI::App& c, EstimateOptions& o) {
  auto& r = o.request;
  c.add_option("--model", o.model, "Shipped model name (see `tessera models`) or path of a Hugging Face config.json")->required();
  c.add_option("--gpu", o.gpu, "GPU profile name (see `tessera gpus`) or path of a profile .json")->capture_default_str();
  c.add_option("--dp", r.layout.dp, "Data-parallel size")->capture_default_str();
  c.add_option("--tp", r.layout.tp, "Tensor-parallel size (hybrid_parallel)")->capture_default_str();
  c.add_option("--pp", r.layout.pp, "Pipeline stages (hybrid_parallel)")->capture_default_str();
  c.add_flag("--sequence-parallel", r.layout.sequence_parallel, "Megatron sequence parallelism in the tp group");
  c.add_option("--cp", r.layout.cp,
               "Context-parallel size: each sequence split over this many ranks, attention as a ring passing keys and values "
               "(hybrid_parallel, or torch_fsdp under --runtime torchtitan)")
      ->capture_default_str();
  c.add_option("--dp-replicate", r.layout.dp_replicate,
               "Hybrid sharding: R replicas of dp/R ranks each, model states sharded within a replica (FSDP HYBRID_SHARD, "
               "ZeRO; torch_fsdp, low_level_zero, hybrid_parallel with --zero-stage 1-2)")
      ->capture_default_str();
  c.add_flag("--tp-comm-overlap", r.plugin.tp_comm_overlap,
             "Tensor-parallel all-gathers and reduce-scatters run under the GEMMs (Megatron-Core --tp-comm-overlap, torchtitan async TP; needs --sequence-parallel)");
  c.add_flag("--overlap-param-gather", r.plugin.overlap_param_gather,
             "The distributed optimizer's parameter all-gather runs under the next step's forward (Megatron-Core --overlap-param-gather; hybrid_parallel, --zero-stage 1 or 2)");
  c.add_flag("--cross-entropy-loss-fusion", r.plugin.cross_entropy_loss_fusion,
             "The loss over the vocabulary runs as Megatron-Core's fused kernels (Megatron-Core --cross-entropy-loss-fusion; --runtime megatron)");
  c.add_flag("--no-overlap-p2p-communication", r.plugin.no_overlap_p2p_comm,
             "The interleaved schedule's pipeline sends hold the stage instead of running under the passes (Megatron-LM "
             "--no-overlap-p2p-communication, and its behaviour before Megatron-Core; --runtime megatron)");
  c.add_flag("--scatter-gather-tensors-in-pipeline", r.plugin.pipeline_scatter_gather,
             "Each tp rank sends 1/tp of a stage's output and the receiver all-gathers it (Megatron-LM's default through 2022, "
             "without --sequence-parallel; --runtime megatron)");
  c.add_flag("--no-gradient-accumulation-fusion", r.plugin.no_gradient_accumulation_fusion,
             "Every gradient is added into the main-gradient buffer by a kernel of its own, not inside its weight-gradient GEMM "
             "(Megatron-LM --no-gradient-accumulation-fusion, and what it did for fp16 through 2022; --runtime megatron)");
  c.add_flag("--grad-reduce-in-bf16", r.plugin.grad_reduce_in_bf16,
             "Megatron's main-gradient buffer kept and reduced in bf16, not fp32 (Megatron-LM --grad-reduce-in-bf16, NeMo's "
             "grad_sync_dtype bf16; --runtime megatron, bf16 or fp8)");
  c.add_flag("--fp8-param-gather", r.plugin.fp8_param_gather,
             "Transformer Engine's weights are FP8 tensors, all-gathered in FP8, with no bf16 copy (Megatron-LM --fp8-param-gather, "
             "NeMo's fp8_params; --runtime megatron, --precision fp8, --zero-stage 1)");
  c.add_flag("--fused-rmsnorm", r.plugin.fused_rmsnorm, kFusedRmsnormHelp);
  c.add_flag("--compile-model-only", r.plugin.compile_model_only, kCompileModelOnlyHelp);
  c.add_flag("--grad-reduce-after-backward", r.plugin.grad_reduce_after_backward,
             "The data-parallel gradient reduction runs after the whole backward, not under it (Megatron-LM --DDP-impl local, "
             "Megatron-Core without --overlap-grad-reduce, DeepSpeed's pipeline engine; hybrid_parallel)");
  c.add_option("--micro-batch", r.training.micro_batch_size, "Samples per micro-batch per data-parallel rank")->capture_default_str();
  c.add_option("--seq", r.training.seq_len, "Tokens per sample")->capture_default_str();
  c.add_option("--micro-batches", r.training.num_micro_batches, "Micro-batches per step")->capture_default_str();
  c.add_option("--precision", o.precision, "fp32, fp16, bf16 (mixed, fp32 master weights) or fp8 (Transformer Engine under --runtime megatron: the blocks' GEMMs in FP8, bf16 weights)")->capture_default_str();
  c.add_option("--optimizer", o.optimizer, "adam, adamw, sgd or sgd_momentum")->capture_default_str();
  c.add_option("--recompute", o.recompute,
               "Activation recompute: none, selective or full (Korthikanti et al. 2022), or op_selective (torchtitan's op-level policy: "
               "--runtime torchtitan, Llama-shaped models)")->capture_default_str();
  c.add_option("--recompute-num-layers", r.training.recompute_num_layers,
               "With --recompute full: recompute only the first N blocks of each model chunk whole, the others keeping all they save "
               "(Megatron-LM's --recompute-method block --recompute-num-layers N; torchtitan's selective_ac_option n recomputes every n-th); "
               "0 = every block")->capture_default_str();
  c.add_option("--activation-profile", o.activation_profile, "flash (fused attention: PyTorch SDPA, FlashAttention-2), hf / hf_eager / hf_autocast (Hugging Face models run eagerly: 16-bit weights with SDPA or eager attention, or fp32 weights under autocast; measured), megatron (Korthikanti 2022), tessera (our engine on the CPU) or tessera_gpu (its GPU step)")->capture_default_str();
  c.add_option("--transformers-version", o.transformers_version, kTransformersVersionHelp);
  c.add_flag("--torch-compile", r.training.torch_compile, kTorchCompileHelp);
  c.add_option("--plugin", o.plugin,
               "torch_ddp, torch_fsdp, low_level_zero, gemini or hybrid_parallel (default: the runtime's: torch_ddp, or under --runtime megatron "
               "hybrid_parallel, torchtitan torch_fsdp, deepspeed low_level_zero)");
  c.add_option("--runtime", o.runtime,
               "Whose model states: colossalai (ColossalAI's plugins, Tessera's engine), megatron (Megatron-Core: hybrid_parallel, "
               "--zero-stage 1 = its distributed optimizer), torchtitan (FSDP2: torch_fsdp) or deepspeed (ZeRO-3: low_level_zero; its pipeline "
               "engine: hybrid_parallel)")
      ->capture_default_str();
  c.add_option("--zero-stage", r.plugin.zero_stage,
               "ZeRO stage: 1-2 for low_level_zero (default 1; 3 under --runtime deepspeed), 0-2 for hybrid_parallel (default 0)");
  c.add_flag("--cpu-offload", r.plugin.cpu_offload, "Keep master weights and optimizer states on the host (ZeRO); torch_fsdp: every shard, gradients and optimizer states (FSDP's CPUOffload)");
  c.add_option("--bucket-mb", o.bucket_mb, "torch_ddp bucket_cap_mb")->capture_default_str();
  c.add_flag("--gradient-as-bucket-view", r.plugin.gradient_as_bucket_view, "torch_ddp: gradients are views into the buckets");
  c.add_flag("--rank-order-reduction", r.plugin.rank_order_reduction,
             "torch_ddp (and hybrid_parallel at ZeRO stage 0, torch_fsdp) as Tessera's engine runs it on GPUs: each all-reduce (reduce-scatter) "
             "stages its payload for a rank-order sum");
  c.add_option("--fsdp-strategy", o.fsdp_strategy, "torch_fsdp: full_shard or shard_grad_op")->capture_default_str();
  c.add_option("--reduce-bucket-m", o.reduce_bucket_m, "low_level_zero reduce_bucket_size_in_m (Mi elements)")->capture_default_str();
  c.add_option("--chunk-size", r.plugin.gemini.chunk_size, "gemini: elements per chunk (0 = search)")->capture_default_str();
  c.add_option("--placement", o.placement, "gemini placement_policy: cuda, cpu, static or auto")->capture_default_str();
  c.add_option("--shard-param-frac", r.plugin.gemini.shard_param_frac, "gemini static: fraction of chunks sharded")->capture_default_str();
  c.add_option("--offload-optim-frac", r.plugin.gemini.offload_optim_frac, "gemini static: ColossalAI's offload_optim_frac (whole chunks, against a total counting each chunk once per tensor)")->capture_default_str();
  c.add_option("--offload-param-frac", r.plugin.gemini.offload_param_frac, "gemini static: fraction of parameter chunks on the host")->capture_default_str();
  add_pin_memory_option(c, r.plugin.pin_memory, "; deepspeed with --cpu-offload: offload_optimizer's pin_memory (its default true)");
  c.add_option("--search-range-m", r.plugin.gemini.search_range_m, "gemini chunk search range (Mi elements)")->capture_default_str();
  c.add_option("--min-chunk-size-m", r.plugin.gemini.min_chunk_size_m, "gemini smallest chunk (Mi elements)")->capture_default_str();
  c.add_option("--search-interval", r.plugin.gemini.search_interval, "gemini chunk search step (elements; ColossalAI hidden_dim)")->capture_default_str();
  auto& ds = r.plugin.deepspeed;
  c.add_option("--stage3-param-persistence-threshold", ds.param_persistence_threshold, "deepspeed: tensors this small (elements) stay whole")
      ->capture_default_str();
  c.add_option("--stage3-prefetch-bucket-size", ds.prefetch_bucket_size, "deepspeed: elements gathered ahead of use")->capture_default_str();
  c.add_option("--stage3-max-live-parameters", ds.max_live_parameters, "deepspeed: bound on what the prefetch adds (elements)")->capture_default_str();
  c.add_option("--stage3-max-reuse-distance", ds.max_reuse_distance, "deepspeed: kept if used again within this many elements")->capture_default_str();
  c.add_option("--reduce-bucket-size", ds.reduce_bucket_size, "deepspeed: reduce_bucket_size (elements; ZeRO-3's bucket, and the pipeline engine's under fp16; --reduce-bucket-m is ColossalAI's)")
      ->capture_default_str();
  c.add_option("--sub-group-size", ds.sub_group_size, "deepspeed: sub_group_size, the optimizer's step in groups of this many elements")
      ->capture_default_str();
  c.add_flag("--offload-param", ds.offload_param, "deepspeed: offload_param on the CPU, the 16-bit partitions on the host (ZeRO-Infinity)");
  c.add_option("--pp-schedule", o.pp_schedule, "Pipeline schedule: gpipe, 1f1b or interleaved")->capture_default_str();
  c.add_option("--model-chunks", r.plugin.num_model_chunks, "interleaved: model chunks per pipeline stage")->capture_default_str();
  c.add_option("--cuda-context-mib", o.cuda_context_mib, "CUDA context size (default: the GPU profile's)");
  c.add_option("--fragmentation", r.assumptions.allocator_reserve_fraction, "Allocator reserve as a fraction of the other device bytes")->capture_default_str();
  c.add_option("--nccl-mib", o.nccl_mib, "NCCL buffers per communicator (MiB)")->capture_default_str();
  c.add_option("--cublas-workspace-mib", o.cublas_workspace_mib, "cuBLAS workspace (MiB)")->capture_default_str();
  c.add_option("--memory-headroom", o.memory_headroom, "Memory every GPU must leave free: GiB (e.g. 2) or a percentage (e.g. 10%)")
      ->capture_default_str();
  c.add_option("--format", o.format, "table, json, csv, md or html (default: from --output's extension, else table)");
  c.add_option("--output,-o", o.output, "Write the report to this file instead of standard output");
}

Result<EstimateOptions> parse_estimate_arguments(const std::vector<std::string>& arguments) {
  CLI::App app{"tessera estimate"};
  EstimateOptions options;
  add_estimate_options(app, options);
  check_integer_options(app);
  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());  // CLI11 takes them last-first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return make_error(ErrorCode::invalid_argument, e.what());
  }
  if (Status s = options.finish(); !s) return s.error();
  return options;
}

}  // namespace tessera::cli
