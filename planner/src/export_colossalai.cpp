// `tessera export --to colossalai`: a Python training script for ColossalAI's
// Booster API that runs the plan.
//
// The plugin's arguments are the plan's `settings`, which carry ColossalAI's
// names (json_io.cpp). Signatures as in hpcaitech/ColossalAI
// colossalai/booster/plugin/:
//   torch_ddp_plugin.py       TorchDDPPlugin(bucket_cap_mb=25, gradient_as_bucket_view=False, ...); no_sync: yes
//   torch_fsdp_plugin.py      TorchFSDPPlugin(sharding_strategy=None, cpu_offload=None, auto_wrap_policy=None, mixed_precision=None, ...)
//                             (torch.distributed.fsdp's own types: cpu_offload a CPUOffload, at 014837e7); no_sync: no
//   low_level_zero_plugin.py  LowLevelZeroPlugin(stage=1, precision="fp16", reduce_bucket_size_in_m=12, cpu_offload=False, ...);
//                             precision in fp16, bf16, fp32; no_sync: stage 1 only
//   gemini_plugin.py          GeminiPlugin(chunk_config_dict=None, placement_policy="static", enable_gradient_accumulation=False, shard_param_frac=1.0,
//                             offload_optim_frac=0.0, offload_param_frac=0.0, precision="fp16", search_range_m=32,
//                             hidden_dim=None, min_chunk_size_m=32, pin_memory=False, enable_async_reduce=True (which sets
//                             pin_memory), ...); placement_policy is "static" or "auto" (the old
//                             "cuda" is static with no offload, the old "cpu" static with both fractions 1); precision fp16
//                             or bf16; the optimizer must be FusedAdam, CPUAdam or HybridAdam (zero/gemini/gemini_optimizer.py);
//                             no_sync: no, accumulation needs enable_gradient_accumulation=True
//   hybrid_parallel_plugin.py HybridParallelPlugin(tp_size, pp_size, precision="fp16", zero_stage=0,
//                             enable_sequence_parallelism=False, sequence_parallelism_mode=None (= "all_to_all"; Megatron's
//                             sequence parallelism is "split_gather"), num_microbatches=None, microbatch_size=None,
//                             cpu_offload=False, pp_style="1f1b" (or "interleaved", "zbv": no GPipe), ...); no_sync: zero 0/1
// Booster(mixed_precision="bf16") cannot run: colossalai/booster/mixed_precision/bf16.py is an abstract stub,
// so the DDP script runs bf16 under torch.autocast and passes mixed_precision only for fp16.
#include <cmath>
#include <sstream>

#include "export_internal.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/export.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/recompute_blocks.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/search.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::json;
using export_detail::cannot_express;

// A Python string literal: JSON's escapes are Python's, and ensure_ascii keeps
// the source ASCII whatever the text holds.
std::string py_str(const std::string& text) { return json(text).dump(-1, ' ', true, json::error_handler_t::replace); }
std::string py_bool(bool value) { return value ? "True" : "False"; }
// A Python float: always with a decimal point or an exponent.
std::string py_float(double value) {
  std::string text = format_number(value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}
// An int when the value is whole (ColossalAI types these int), else a float.
std::string py_number(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) return std::to_string(static_cast<int64_t>(value));
  return py_float(value);
}
std::string py_int(int64_t value) { return std::to_string(value); }

// "name(\n    a=1,\n    b=2,\n)" or "name(a=1, b=2)" when it is short.
std::string call(const std::string& name, const std::vector<std::pair<std::string, std::string>>& args) {
  std::string inline_text = name + "(";
  for (size_t i = 0; i < args.size(); ++i) inline_text += (i ? ", " : "") + args[i].first + "=" + args[i].second;
  inline_text += ")";
  if (inline_text.size() <= 100) return inline_text;
  std::string text = name + "(\n";
  for (const auto& [key, value] : args) text += "        " + key + "=" + value + ",\n";
  return text + "    )";
}

std::string torch_dtype(Precision p) {
  switch (p) {
    case Precision::fp32: return "torch.float32";
    case Precision::fp16: return "torch.float16";
    case Precision::bf16:
    case Precision::fp8: return "torch.bfloat16";  // not exported (export.cpp refuses fp8); its weights are bf16
  }
  return "torch.float32";
}

// The pieces of the script that depend on the plan.
struct Script {
  std::vector<std::string> imports;          // "from x import y" lines beyond the common ones
  std::string plugin_comment;                // lines before the plugin call, each "    # ..."
  std::string plugin_call;                   // "TorchDDPPlugin(...)"
  std::string booster_args = "plugin=plugin";
  bool lazy_init = false;                    // build the model under LazyInitContext
  bool no_sync = false;                      // skip gradient synchronization on non-final micro-batches
  std::string no_sync_model = "model";       // what booster.no_sync is given: the TorchDDPModel
  std::string clip;                          // the line before optimizer.step() that clips, when the plugin does not
  bool autocast_bf16 = false;                // DDP with bf16: torch.autocast
  bool pipeline = false;                     // booster.execute_pipeline
  std::string optimizer;                     // "HybridAdam(model.parameters(), ...)"
};

// How the script sets Gemini's chunk size: ColossalAI's own search reaches the
// plan's size when the plan took the searched size and the model is large
// enough to be sharded (search_chunk_configuration keeps a model under
// min_chunk_size_m Mi elements in one chunk gathered on every rank,
// keep_gathered=True); otherwise chunk_config_dict fixes it, keyed by the
// zero group's size (ChunkManager's config_key), colossalai/zero/gemini/chunk/
// search_utils.py and manager.py at v0.5.0 (d322ff8c).
struct ChunkChoice {
  int64_t searched = 0;     // what the search gives for this model and dp
  int64_t parameters = 0;   // the model's parameter count
};

void gemini_chunk_args(const EstimateRequest& r, const ChunkChoice& chunks, Script& s, std::vector<std::pair<std::string, std::string>>& args) {
  const GeminiOptions& g = r.plugin.gemini;
  const int64_t size = g.chunk_size > 0 ? g.chunk_size : chunks.searched;
  const std::string bytes = format_bytes(size * compute_bytes(r.training.precision)) + " in " + std::string(enum_name(r.training.precision));
  const bool searched = size == chunks.searched && static_cast<double>(chunks.parameters) >= g.min_chunk_size_m * 1048576.0;
  if (searched) {
    args.emplace_back("search_range_m", py_number(g.search_range_m));
    args.emplace_back("min_chunk_size_m", py_number(g.min_chunk_size_m));
    args.emplace_back("hidden_dim", py_int(g.search_interval));
    s.plugin_comment += "    # ColossalAI's chunk search settles on chunks of " + std::to_string(size) + " elements (" + bytes + "), as Tessera's does.\n";
    return;
  }
  args.emplace_back("chunk_config_dict", "{" + py_int(r.layout.dp) + ": dict(chunk_size=" + py_int(size) + ", keep_gathered=False)}");
  s.plugin_comment += "    # The plan's chunks, " + std::to_string(size) + " elements (" + bytes + ") sharded over the " + std::to_string(r.layout.dp) +
                      " data-parallel ranks: fixed here, since ColossalAI's own search would " +
                      (size == chunks.searched ? std::string("keep this small model in one unsharded chunk") : "pick " + std::to_string(chunks.searched)) +
                      ".\n";
}

// --recompute-num-layers K: the blocks each virtual stage checkpoints, in
// PipelineGradientCheckpointConfig's order (stage + chunk · pp), K or the
// stage's blocks where it has fewer (recompute_blocks.h); empty for every block.
Result<std::vector<int64_t>> checkpointed_blocks_per_stage(const PlanFile& file, const EstimateRequest& r) {
  if (r.training.recompute != RecomputeMode::full || r.training.recompute_num_layers == 0) return std::vector<int64_t>{};
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  if (!colossalai_checkpoints_some_blocks(model->config, r)) {
    const bool family = colossalai_pipelines_checkpoint_some_blocks(model->config);
    return cannot_express("colossalai", "the plan recomputes only the first " + std::to_string(r.training.recompute_num_layers) +
                                            " blocks of each chunk (--recompute-num-layers), which ColossalAI does only in HybridParallelPlugin's "
                                            "pipelines of Llama, Mistral and Qwen2 models (gradient_checkpoint_config); " +
                                            (family ? std::string("plan again with --plugin hybrid_parallel and --pp 2 or more, or with --recompute-num-layers 0")
                                                    : model->config.name + " is none of them: plan again with --recompute-num-layers 0"));
  }
  const int64_t pp = r.layout.pp, chunks = r.plugin.model_chunks();
  const auto stages = stage_chunks(static_cast<int>(model->config.num_layers), static_cast<int>(pp), static_cast<int>(chunks));
  std::vector<int64_t> per_stage(static_cast<size_t>(pp * chunks));
  for (int64_t stage = 0; stage < pp; ++stage) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      per_stage[static_cast<size_t>(stage + chunk * pp)] =
          blocks_recomputed_whole(r.training, stages[static_cast<size_t>(stage)][static_cast<size_t>(chunk)].num_layers);
    }
  }
  return per_stage;
}

Status plugin_script(const EstimateRequest& r, const ChunkChoice& chunks, const std::vector<int64_t>& checkpointed, Script& s) {
  const PluginOptions& p = r.plugin;
  const TrainingOptions& t = r.training;
  const ParallelLayout& l = r.layout;
  const std::string precision = py_str(std::string(enum_name(t.precision)));
  const int64_t accumulation = export_detail::gradient_accumulation_steps(r);
  switch (p.kind) {
    case PluginKind::torch_ddp:
      s.imports.push_back("from colossalai.booster.plugin import TorchDDPPlugin");
      s.plugin_call = call("TorchDDPPlugin", {{"bucket_cap_mb", py_number(static_cast<double>(p.bucket_bytes) / (1 << 20))},
                                              {"gradient_as_bucket_view", py_bool(p.gradient_as_bucket_view)}});
      if (t.precision == Precision::fp16) {
        s.booster_args += ", mixed_precision=\"fp16\"";
        s.plugin_comment += "    # fp16: the booster's torch.cuda.amp mixed precision, with dynamic loss scaling.\n";
        // boost() wraps the TorchDDPModel in a TorchAMPModule, and TorchDDPPlugin.no_sync asserts
        // "Model is not boosted by TorchDDPPlugin" unless given the TorchDDPModel itself
        // (booster/booster.py boost, booster/plugin/torch_ddp_plugin.py no_sync, v0.5.0 d322ff8c).
        s.no_sync_model = "model.module";
      }
      if (t.precision == Precision::bf16) {
        s.autocast_bf16 = true;
        s.plugin_comment += "    # bf16: torch.autocast in the training loop (ColossalAI's Booster has no bf16 mixed precision for DDP).\n";
      }
      s.no_sync = true;
      // OptimizerWrapper.clip_grad_by_norm (TorchAMPOptimizer unscales first), interface/optimizer.py.
      s.clip = "optimizer.clip_grad_by_norm(MAX_GRAD_NORM)";
      break;
    case PluginKind::torch_fsdp: {
      s.imports.push_back("import functools");
      s.imports.push_back("from colossalai.booster.plugin import TorchFSDPPlugin");
      s.imports.push_back(p.cpu_offload ? "from torch.distributed.fsdp import CPUOffload, MixedPrecision, ShardingStrategy"
                                        : "from torch.distributed.fsdp import MixedPrecision, ShardingStrategy");
      s.imports.push_back("from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy");
      s.plugin_comment += "    # One FSDP unit per transformer block, as Tessera's memory model assumes.\n";
      std::vector<std::pair<std::string, std::string>> args{
          {"sharding_strategy", p.fsdp_strategy == FsdpStrategy::full_shard ? "ShardingStrategy.FULL_SHARD" : "ShardingStrategy.SHARD_GRAD_OP"},
          {"auto_wrap_policy", "functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=block_classes(model))"}};
      if (p.cpu_offload) {
        // The shards and their gradients on the host; the optimizer, built over them, steps there (fsdp_offload.h).
        args.emplace_back("cpu_offload", "CPUOffload(offload_params=True)");
      }
      if (is_mixed_precision(t.precision)) {
        const std::string dtype = torch_dtype(t.precision);
        args.emplace_back("mixed_precision", "MixedPrecision(param_dtype=" + dtype + ", reduce_dtype=" + dtype + ", buffer_dtype=" + dtype + ")");
      }
      if (t.precision == Precision::fp16) {
        s.plugin_comment += "    # fp16: the plugin scales no loss; add torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler if gradients underflow.\n";
      }
      s.plugin_call = call("TorchFSDPPlugin", args);
      // FSDP.clip_grad_norm_ takes the norm over every rank's shards; OptimizerWrapper.clip_grad_by_norm would take this rank's alone.
      s.clip = "model.module.clip_grad_norm_(MAX_GRAD_NORM)";  // TorchFSDPModel.module is the FSDP module
      break;
    }
    case PluginKind::low_level_zero:
      s.imports.push_back("from colossalai.booster.plugin import LowLevelZeroPlugin");
      s.plugin_call = call("LowLevelZeroPlugin", {{"stage", py_int(p.effective_zero_stage())},
                                                  {"precision", precision},
                                                  {"cpu_offload", py_bool(p.cpu_offload)},
                                                  {"reduce_bucket_size_in_m", py_number(static_cast<double>(p.reduce_bucket_numel) / (1 << 20))},
                                                  {"max_norm", "MAX_GRAD_NORM"}});
      s.no_sync = p.effective_zero_stage() == 1;
      break;
    case PluginKind::gemini: {
      if (t.precision == Precision::fp32) {
        return cannot_express("colossalai", "GeminiPlugin supports only fp16 and bf16 precision, and the plan uses fp32");
      }
      if (t.optimizer == OptimizerKind::sgd || t.optimizer == OptimizerKind::sgd_momentum) {
        return cannot_express("colossalai", "GeminiPlugin's optimizer must be HybridAdam, CPUAdam or FusedAdam, and the plan uses " +
                                                std::string(enum_name(t.optimizer)));
      }
      s.imports.push_back("from colossalai.booster.plugin import GeminiPlugin");
      s.lazy_init = true;
      const GeminiOptions& g = p.gemini;
      std::vector<std::pair<std::string, std::string>> args;
      double shard = g.shard_param_frac, optim = g.offload_optim_frac, param = g.offload_param_frac;
      if (g.placement_policy == GeminiPlacement::cuda) {
        shard = 1, optim = 0, param = 0;
        s.plugin_comment += "    # Tessera's placement \"cuda\" is ColossalAI's static placement with nothing offloaded (the old \"cuda\" policy).\n";
      }
      if (g.placement_policy == GeminiPlacement::cpu) {
        shard = 1, optim = 1, param = 1;
        s.plugin_comment += "    # Tessera's placement \"cpu\" is ColossalAI's static placement with everything offloaded (the old \"cpu\" policy).\n";
      }
      if (g.placement_policy == GeminiPlacement::auto_placement) {
        args.emplace_back("placement_policy", "\"auto\"");
        s.plugin_comment += "    # \"auto\" moves chunks between GPU and host at run time; the static fractions do not apply.\n";
      } else {
        args.emplace_back("placement_policy", "\"static\"");
        args.emplace_back("shard_param_frac", py_float(shard));
        args.emplace_back("offload_optim_frac", py_float(optim));
        args.emplace_back("offload_param_frac", py_float(param));
      }
      gemini_chunk_args(r, chunks, s, args);
      args.emplace_back("precision", precision);
      args.emplace_back("max_norm", "MAX_GRAD_NORM");
      if (p.pin_memory) {
        s.plugin_comment += "    # Its default enable_async_reduce=True pins a host copy of every chunk (pin_memory), as the plan counts.\n";
      } else {
        args.emplace_back("enable_async_reduce", "False");
        s.plugin_comment += "    # No pinned host copies of the chunks (pin_memory stays False), as the plan counts.\n";
      }
      if (accumulation > 1) {
        args.emplace_back("enable_gradient_accumulation", "True");
        s.plugin_comment += "    # Gemini has no no_sync: it accumulates gradients across micro-batches when told to.\n";
      }
      s.plugin_call = call("GeminiPlugin", args);
      break;
    }
    case PluginKind::hybrid_parallel: {
      s.imports.push_back("from colossalai.booster.plugin import HybridParallelPlugin");
      s.lazy_init = true;
      s.pipeline = l.pp > 1;
      // dp_outside=False orders the mesh (pp, dp, tp): rank = tp_rank + tp · (dp_rank + dp · pp_rank),
      // the planner's rank order (rank_groups.h); ColossalAI's default, True, puts dp outermost
      // (HybridParallelPlugin.__init__'s ProcessGroupMesh, booster/plugin/hybrid_parallel_plugin.py, v0.5.0 d322ff8c).
      std::vector<std::pair<std::string, std::string>> args{{"tp_size", py_int(l.tp)},
                                                            {"pp_size", py_int(l.pp)},
                                                            {"zero_stage", py_int(p.effective_zero_stage())},
                                                            {"dp_outside", "False"}};
      s.plugin_comment += "    # dp_outside=False: data-parallel groups inside pipeline stages, tensor-parallel ranks adjacent, as planned.\n";
      if (l.pp > 1) {
        if (p.pp_schedule == PipelineSchedule::gpipe) {
          return cannot_express("colossalai", "HybridParallelPlugin's pp_style is 1f1b, interleaved or zbv; it has no gpipe schedule, which "
                                              "this plan uses; re-plan for the 1f1b schedule");
        }
        args.emplace_back("num_microbatches", py_int(t.num_micro_batches));
        args.emplace_back("microbatch_size", py_int(t.micro_batch_size));
        args.emplace_back("pp_style", py_str(std::string(enum_name(p.pp_schedule))));
        if (p.pp_schedule == PipelineSchedule::interleaved) args.emplace_back("num_model_chunks", std::to_string(p.num_model_chunks));
        if (!checkpointed.empty()) {
          std::string list;
          for (int64_t n : checkpointed) list += (list.empty() ? "" : ", ") + py_int(n);
          s.imports.push_back("from colossalai.shardformer.shard.grad_ckpt_config import PipelineGradientCheckpointConfig");
          args.emplace_back("gradient_checkpoint_config", "PipelineGradientCheckpointConfig(num_ckpt_layers_per_stage=[" + list + "])");
          s.plugin_comment += "    # recompute full on the first " + std::to_string(t.recompute_num_layers) +
                              " blocks of each (virtual) stage, in stage + chunk x pp order; the others keep all they save.\n";
        }
      } else {
        s.plugin_comment += "    # No pipeline: the plan's " + std::to_string(t.num_micro_batches) +
                            " micro-batches per step are gradient accumulation in the loop below.\n";
      }
      args.emplace_back("enable_sequence_parallelism", py_bool(l.sequence_parallel));
      if (l.sequence_parallel) {
        args.emplace_back("sequence_parallelism_mode", "\"split_gather\"");
        s.plugin_comment += "    # Megatron sequence parallelism (Korthikanti et al. 2022) is ColossalAI's \"split_gather\" mode.\n";
      }
      if (t.recompute == RecomputeMode::selective) {
        args.emplace_back("enable_flash_attention", "True");
        s.plugin_comment += "    # recompute selective: flash attention recomputes the attention scores in backward instead of keeping them.\n";
      }
      args.emplace_back("cpu_offload", py_bool(p.cpu_offload));
      args.emplace_back("precision", precision);
      args.emplace_back("max_norm", "MAX_GRAD_NORM");
      s.plugin_call = call("HybridParallelPlugin", args);
      s.no_sync = l.pp == 1 && p.effective_zero_stage() < 2;
      break;
    }
  }
  // The optimizer: HybridAdam (ColossalAI's fused GPU / CPU Adam) where ColossalAI manages the
  // optimizer states, PyTorch's own under the PyTorch plugins.
  const bool colossal = p.kind == PluginKind::gemini || p.kind == PluginKind::low_level_zero || p.kind == PluginKind::hybrid_parallel;
  switch (t.optimizer) {
    case OptimizerKind::adam:
    case OptimizerKind::adamw: {
      const bool w = t.optimizer == OptimizerKind::adamw;
      const std::string decay = w ? "0.01" : "0.0";
      if (colossal) {
        s.imports.push_back("from colossalai.nn.optimizer import HybridAdam");
        s.optimizer = "HybridAdam(model.parameters(), lr=LEARNING_RATE, weight_decay=" + decay + ", adamw_mode=" + py_bool(w) + ")";
      } else {
        s.optimizer = std::string(w ? "torch.optim.AdamW" : "torch.optim.Adam") + "(model.parameters(), lr=LEARNING_RATE, weight_decay=" + decay + ")";
      }
      break;
    }
    case OptimizerKind::sgd: s.optimizer = "torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)"; break;
    case OptimizerKind::sgd_momentum: s.optimizer = "torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)"; break;
  }
  return Status::success();
}

// The config.json as a raw Python string: ASCII JSON with every ' escaped, so
// that no ''' can end the literal early (a ' only occurs inside JSON strings).
Result<std::string> embedded_config(const std::string& model_source) {
  auto text = model_config_text(model_source, "model.source");
  if (!text) return text.error();
  json config;
  try {
    config = json::parse(text.value());
  } catch (const json::exception& e) {
    return make_error(ErrorCode::parse_error, "model.source: '" + one_line(model_source, 120) + "' is not valid JSON: " + one_line(e.what(), 120));
  }
  std::string dumped = config.dump(2, ' ', true, json::error_handler_t::replace);
  std::string out;
  for (char c : dumped) out += c == '\'' ? std::string("\\u0027") : std::string(1, c);
  return out;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

}  // namespace

Result<std::string> export_colossalai(const PlanFile& file, size_t plan_index) {
  if (Status st = export_detail::check_plan(file, plan_index); !st) return st.error();
  const EstimateRequest& r = file.plans[plan_index];
  const TrainingOptions& t = r.training;
  const ParallelLayout& l = r.layout;
  ChunkChoice chunks;
  if (r.plugin.kind == PluginKind::gemini) {
    auto model = load_model(file.model_source, "model.source");
    if (!model) return model.error();
    chunks = {search_chunk_size(model->inventory, r.plugin.gemini, l.dp), model->parameter_count};
  }
  auto checkpointed = checkpointed_blocks_per_stage(file, r);
  if (!checkpointed) return checkpointed.error();
  Script s;
  if (Status st = plugin_script(r, chunks, checkpointed.value(), s); !st) return st.error();
  auto config = embedded_config(file.model_source);
  if (!config) return config.error();
  auto dropout = export_detail::uncounted_dropout(file, r);
  if (!dropout) return dropout.error();

  const json& plan = export_detail::plan_json(file, plan_index);
  const double tokens_per_s = value_or(plan, "tokens_per_s", 0.0);
  const double step_time_s = value_or(plan, "step_time_s", 0.0);
  const double mfu = value_or(plan, "mfu", 0.0);
  const int64_t peak_bytes = value_or(plan, "peak_device_bytes", int64_t{0});
  const int64_t accumulation = export_detail::gradient_accumulation_steps(r);
  const int64_t sequences = export_detail::sequences_per_step(r);
  const std::string description = one_line(describe_plan(r), 200);
  const std::string model_name = one_line(file.model_source, 200);
  const ClusterSpec& c = file.cluster;
  const std::string launch = c.num_nodes > 1 ? "torchrun --nnodes " + std::to_string(c.num_nodes) + " --nproc_per_node " +
                                                   std::to_string(c.gpus_per_node) + " --rdzv_backend c10d --rdzv_endpoint HOST:29500 train.py"
                                             : "torchrun --nproc_per_node " + std::to_string(c.gpus_per_node) + " train.py";

  std::ostringstream py;
  py << "#!/usr/bin/env python3\n"
     << "# Generated by Tessera 0.1.0 (`tessera export --to colossalai`) from plan " << plan_index + 1 << " of " << file.plans.size()
     << " in a plan file:\n"
     << "#   " << description << "\n"
     << "#   model " << model_name << " on " << c.world_size() << " x " << one_line(c.gpu.name, 80) << " (" << c.num_nodes << " node"
     << (c.num_nodes > 1 ? "s" : "") << " x " << c.gpus_per_node << " GPUs), " << sequences << " sequences x " << t.seq_len << " tokens per step, "
     << enum_name(t.precision) << ", " << enum_name(t.optimizer) << ", recompute " << describe_recompute(r) << "\n"
     << "# Tessera predicts: peak memory " << format_bytes(peak_bytes) << " per GPU (allocator reserve and CUDA context included), step "
     << fixed(step_time_s, 3) << " s, " << fixed(tokens_per_s, 0) << " tokens/s, MFU " << fixed(100 * mfu, 1) << "%.\n"
     << "#\n"
     << "# Run on every node: " << launch << "\n"
     << "# (or `colossalai run --nproc_per_node " << c.gpus_per_node << (c.num_nodes > 1 ? " --hostfile HOSTFILE" : "")
     << " train.py`). The data are random tokens: replace\n"
     << "# RandomTokens with your dataset. Each step prints its measured tokens/s and peak memory next to Tessera's.\n"
     << "import os\n"
     << "import tempfile\n"
     << "import time\n";
  if (s.no_sync) py << "from contextlib import nullcontext\n";
  for (const std::string& line : s.imports) {
    if (line.starts_with("import ")) py << line << "\n";
  }
  py << "\n"
     << "import torch\n"
     << "import torch.distributed as dist\n"
     << "from torch.utils.data import Dataset\n"
     << "from transformers import AutoConfig, AutoModelForCausalLM\n"
     << "\n"
     << "import colossalai\n"
     << "from colossalai.accelerator import get_accelerator\n"
     << "from colossalai.booster import Booster\n";
  for (const std::string& line : s.imports) {
    if (line.starts_with("from colossalai")) py << line << "\n";
  }
  if (s.lazy_init) py << "from colossalai.lazy import LazyInitContext\n";
  for (const std::string& line : s.imports) {
    if (line.starts_with("from torch")) py << line << "\n";
  }
  py << "\n"
     << "MODEL_NAME = " << py_str(model_name) << "\n"
     << "# The model's config.json (as Tessera read it); the weights are initialised at random.\n"
     << "MODEL_CONFIG = r'''" << config.value() << "'''\n"
     << "\n"
     << "WORLD_SIZE = " << l.world_size() << "\n"
     << "DP_SIZE = " << l.dp << "\n"
     << "SEQ_LEN = " << t.seq_len << "\n"
     << "MICRO_BATCH_SIZE = " << t.micro_batch_size << "\n"
     << "NUM_MICROBATCHES = " << t.num_micro_batches << "  # per data-parallel rank and step\n"
     << "GRADIENT_ACCUMULATION_STEPS = " << accumulation << (s.pipeline ? "  # the pipeline runs the micro-batches\n" : "\n")
     << "GLOBAL_BATCH_SIZE = " << sequences << "  # sequences per optimizer step: micro-batch x micro-batches x dp\n"
     << "LEARNING_RATE = 1e-4  # a placeholder: Tessera plans memory and speed, not the schedule\n"
     << "MAX_GRAD_NORM = " << py_float(kMaxGradNorm) << "  # global gradient-norm clipping, as Tessera's engine and the DeepSpeed export\n"
     << "STEPS = 20\n"
     << "PREDICTED_TOKENS_PER_S = " << py_float(tokens_per_s) << "\n"
     << "PREDICTED_PEAK_BYTES = " << peak_bytes << "\n"
     << "\n"
     << "\n"
     << "class RandomTokens(Dataset):\n"
     << "    \"\"\"Random token ids with labels = inputs: stands in for a real dataset.\"\"\"\n"
     << "\n"
     << "    def __init__(self, num_samples, seq_len, vocab_size):\n"
     << "        self.num_samples, self.seq_len, self.vocab_size = num_samples, seq_len, vocab_size\n"
     << "\n"
     << "    def __len__(self):\n"
     << "        return self.num_samples\n"
     << "\n"
     << "    def __getitem__(self, index):\n"
     << "        generator = torch.Generator().manual_seed(index)\n"
     << "        ids = torch.randint(0, self.vocab_size, (self.seq_len,), generator=generator)\n"
     << "        return {\"input_ids\": ids, \"attention_mask\": torch.ones_like(ids), \"labels\": ids.clone()}\n"
     << "\n"
     << "\n"
     << "def model_config():\n"
     << "    with tempfile.TemporaryDirectory() as directory:\n"
     << "        with open(os.path.join(directory, \"config.json\"), \"w\") as f:\n"
     << "            f.write(MODEL_CONFIG)\n"
     << "        return AutoConfig.from_pretrained(directory)\n"
     << "\n"
     << "\n";
  if (r.plugin.kind == PluginKind::torch_fsdp) {
    py << "def block_classes(model):\n"
       << "    \"\"\"The transformer block classes (transformers lists them in _no_split_modules).\"\"\"\n"
       << "    names = set(getattr(model, \"_no_split_modules\", None) or [])\n"
       << "    return {type(m) for m in model.modules() if type(m).__name__ in names}\n"
       << "\n"
       << "\n";
  }
  py << "def synchronize(device):\n"
     << "    \"\"\"Waits for the GPU's queued kernels, so that a step's time is the GPU's (a CPU rank has none to wait for).\"\"\"\n"
     << "    if device.type == \"cuda\":\n"
     << "        torch.cuda.synchronize(device)\n"
     << "\n"
     << "\n"
     << "def batches(dataloader, device):\n"
     << "    \"\"\"The loader's batches on the GPU, round after round.\"\"\"\n"
     << "    while True:\n"
     << "        for batch in dataloader:\n"
     << "            yield {key: value.to(device) for key, value in batch.items()}\n"
     << "\n"
     << "\n"
     << "def main():\n"
     << "    colossalai.launch_from_torch(seed=42)\n"
     << "    assert dist.get_world_size() == WORLD_SIZE, f\"this plan is for {WORLD_SIZE} GPUs, not {dist.get_world_size()}\"\n"
     << "    device = get_accelerator().get_current_device()\n"
     << "\n"
     << "    config = model_config()\n";
  if (!dropout->empty()) {
    py << "    # The plan's activation profile (" << enum_name(t.activation_profile) << ") counts no dropout masks: train without dropout,\n"
       << "    # as planned (the config has " << export_detail::describe_dropout(dropout.value()) << ").\n";
    for (const export_detail::DropoutField& f : dropout.value()) py << "    config." << f.name << " = 0.0\n";
  }
  const bool sdpa = t.recompute == RecomputeMode::selective && r.plugin.kind != PluginKind::hybrid_parallel;
  if (sdpa) {
    py << "    # recompute selective: a fused attention kernel recomputes the attention scores in backward\n"
       << "    # instead of keeping them (Korthikanti et al. 2022 section 5).\n";
  }
  const std::string from_config = std::string("AutoModelForCausalLM.from_config(config") + (sdpa ? ", attn_implementation=\"sdpa\")" : ")");
  if (s.lazy_init) {
    py << "    # Parameters materialise when the plugin shards them, not first in full on every rank.\n"
       << "    with LazyInitContext(default_device=device):\n"
       << "        model = " << from_config << "\n";
  } else {
    py << "    model = " << from_config << "\n";
  }
  if (t.recompute == RecomputeMode::full) {
    py << (t.recompute_num_layers > 0 ? "    # recompute full: the plugin's gradient_checkpoint_config says which blocks.\n"
                                       : "    # recompute full: every transformer block is recomputed in backward.\n")
       << "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})\n";
  }
  py << "    optimizer = " << s.optimizer << "\n"
     << "\n"
     << s.plugin_comment << "    plugin = " << s.plugin_call << "\n"
     << "    booster = Booster(" << s.booster_args << ")\n"
     << "\n"
     << "    dataset = RandomTokens(GLOBAL_BATCH_SIZE * STEPS, SEQ_LEN, config.vocab_size)\n"
     << "    dataloader = plugin.prepare_dataloader(dataset, batch_size=" << (s.pipeline ? "MICRO_BATCH_SIZE * NUM_MICROBATCHES" : "MICRO_BATCH_SIZE")
     << ", shuffle=True, drop_last=True)\n"
     << "    model, optimizer, _, dataloader, _ = booster.boost(model, optimizer, dataloader=dataloader)\n"
     << "    data = batches(dataloader, device)\n"
     << "\n"
     << "    model.train()\n"
     << "    report = dist.get_rank() == dist.get_world_size() - 1  # the last rank holds the loss, pipeline or not\n"
     << "    for step in range(STEPS):\n"
     << "        synchronize(device)\n"
     << "        start = time.perf_counter()\n";
  if (s.pipeline) {
    py << "        # One call runs the step's NUM_MICROBATCHES micro-batches through the " << enum_name(r.plugin.pp_schedule)
       << " schedule, forward and backward.\n"
       << "        outputs = booster.execute_pipeline(\n"
       << "            data, model, criterion=lambda outputs, inputs: outputs.loss, optimizer=optimizer, return_loss=True\n"
       << "        )\n"
       << "        loss = outputs[\"loss\"]\n";
  } else {
    py << "        loss = torch.zeros((), device=device)\n"
       << "        for micro_step in range(GRADIENT_ACCUMULATION_STEPS):\n"
       << "            batch = next(data)\n";
    std::string body = "            ";
    if (s.no_sync) {
      py << "            last = micro_step == GRADIENT_ACCUMULATION_STEPS - 1\n"
         << "            # Gradients are synchronised once per step, after the last micro-batch.\n"
         << "            with nullcontext() if last else booster.no_sync(" << s.no_sync_model << ", optimizer):\n";
      body += "    ";
    } else if (accumulation > 1) {
      py << "            # The plugin has no no_sync: gradients are reduced after every micro-batch.\n";
    }
    if (s.autocast_bf16) {
      py << body << "with torch.autocast(device.type, dtype=torch.bfloat16):\n"
         << body << "    micro_loss = model(**batch).loss / GRADIENT_ACCUMULATION_STEPS\n";
    } else {
      py << body << "micro_loss = model(**batch).loss / GRADIENT_ACCUMULATION_STEPS\n";
    }
    py << body << "booster.backward(micro_loss, optimizer)\n"
       << "            loss += micro_loss.detach()\n";
  }
  if (!s.clip.empty()) py << "        " << s.clip << "\n";
  py << "        optimizer.step()\n"
     << "        optimizer.zero_grad()\n"
     << "        synchronize(device)\n"
     << "        seconds = time.perf_counter() - start\n"
     << "        if report:\n"
     << "            shown = f\"{loss.item():.4f}\" if loss is not None else \"-\"\n"
     << "            print(\n"
     << "                f\"step {step}: loss {shown}, {seconds:.3f} s, {GLOBAL_BATCH_SIZE * SEQ_LEN / seconds:.0f} tokens/s \"\n"
     << "                f\"(Tessera: {PREDICTED_TOKENS_PER_S:.0f}), peak {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB \"\n"
     << "                f\"(Tessera: {PREDICTED_PEAK_BYTES / 2**30:.2f} GiB)\",\n"
     << "                flush=True,\n"
     << "            )\n"
     << "\n"
     << "\n"
     << "if __name__ == \"__main__\":\n"
     << "    main()\n";
  return py.str();
}

}  // namespace tessera::planner
