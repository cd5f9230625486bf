#include "tessera/planner/json_io.h"

#include <algorithm>

#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

json settings_json(const PluginOptions& p, const ParallelLayout& l, const TrainingOptions& t) {
  switch (p.kind) {
    case PluginKind::torch_ddp: {
      json ddp{{"bucket_cap_mb", static_cast<double>(p.bucket_bytes) / (1 << 20)}, {"gradient_as_bucket_view", p.gradient_as_bucket_view}};
      if (p.rank_order_reduction) ddp["rank_order_reduction"] = true;  // Tessera's engine only: absent from PyTorch's settings
      return ddp;
    }
    case PluginKind::torch_fsdp: {
      json fsdp{{"sharding_strategy", enum_name(p.fsdp_strategy)}};
      if (p.rank_order_reduction) fsdp["rank_order_reduction"] = true;  // Tessera's engine only, as torch_ddp's
      if (p.cpu_offload) fsdp["cpu_offload"] = true;  // CPUOffload(offload_params=True)
      if (p.fused_rmsnorm) fsdp["fused_rmsnorm"] = true;  // torchtitan's norm_type
      if (p.compile_model_only) fsdp["compile_model_only"] = true;  // torchtitan's [compile] components
      return fsdp;
    }
    case PluginKind::low_level_zero:
      if (p.runtime == Runtime::deepspeed) {  // DeepSpeed's own keys (DeepSpeedZeroConfig)
        return {{"stage", p.effective_zero_stage()}, {"stage3_param_persistence_threshold", p.deepspeed.param_persistence_threshold},
                {"stage3_prefetch_bucket_size", p.deepspeed.prefetch_bucket_size}, {"stage3_max_live_parameters", p.deepspeed.max_live_parameters},
                {"stage3_max_reuse_distance", p.deepspeed.max_reuse_distance}, {"reduce_bucket_size", p.deepspeed.reduce_bucket_size},
                {"sub_group_size", p.deepspeed.sub_group_size}, {"cpu_offload", p.cpu_offload}, {"pin_memory", p.pin_memory},
                {"offload_param", p.deepspeed.offload_param}};
      }
      return {{"stage", p.effective_zero_stage()}, {"cpu_offload", p.cpu_offload},
              {"reduce_bucket_size_in_m", static_cast<double>(p.reduce_bucket_numel) / (1 << 20)}};
    case PluginKind::gemini:
      return {{"placement_policy", enum_name(p.gemini.placement_policy)}, {"shard_param_frac", p.gemini.shard_param_frac},
              {"offload_optim_frac", p.gemini.offload_optim_frac}, {"offload_param_frac", p.gemini.offload_param_frac},
              {"chunk_size", p.gemini.chunk_size}, {"search_range_m", p.gemini.search_range_m},
              {"min_chunk_size_m", p.gemini.min_chunk_size_m}, {"hidden_dim", p.gemini.search_interval},
              {"pin_memory", p.pin_memory}};
    case PluginKind::hybrid_parallel: {
      json hybrid{{"tp_size", l.tp}, {"pp_size", l.pp}, {"zero_stage", p.effective_zero_stage()}, {"cpu_offload", p.cpu_offload},
              {"enable_sequence_parallelism", l.sequence_parallel}, {"num_microbatches", t.num_micro_batches},
              {"microbatch_size", t.micro_batch_size}, {"pp_style", enum_name(p.pp_schedule)}, {"num_model_chunks", p.num_model_chunks},
              {"tp_comm_overlap", p.tp_comm_overlap}, {"overlap_param_gather", p.overlap_param_gather},
              {"cross_entropy_loss_fusion", p.cross_entropy_loss_fusion},
              {"grad_reduce_after_backward", p.grad_reduce_after_backward}, {"no_overlap_p2p_comm", p.no_overlap_p2p_comm},
              {"pipeline_scatter_gather", p.pipeline_scatter_gather}, {"no_gradient_accumulation_fusion", p.no_gradient_accumulation_fusion},
              {"grad_reduce_in_bf16", p.grad_reduce_in_bf16}, {"fp8_param_gather", p.fp8_param_gather}};
      if (p.rank_order_reduction) hybrid["rank_order_reduction"] = true;  // Tessera's engine only, as torch_ddp's
      return hybrid;
    }
  }
  return json::object();
}

// Typed reads with errors that name the key.
class Reader {
 public:
  Reader(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  template <typename T>
  Status read(const char* key, T& out) const {
    auto it = object_.find(key);
    if (it == object_.end()) return Status::success();  // absent: keep the default
    try {
      if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) throw json::type_error::create(302, "not a boolean", nullptr);
      } else if constexpr (std::is_integral_v<T>) {
        // 2.5 or 1e30 for a count would be truncated or overflow: whole numbers only.
        if (!it->is_number_integer()) throw json::type_error::create(302, "not a whole number", nullptr);
      } else if constexpr (std::is_arithmetic_v<T>) {
        if (!it->is_number()) throw json::type_error::create(302, "not a number", nullptr);
      }
      out = it->get<T>();
    } catch (const json::exception&) {
      return make_error(ErrorCode::parse_error, where_ + ": key '" + key + "' has the wrong type");
    }
    return Status::success();
  }

  template <typename E>
  Status read_enum(const char* key, E& out) const {
    std::string name;
    if (Status s = read(key, name); !s) return s;
    if (name.empty()) return Status::success();
    auto value = parse_enum<E>(name);
    if (!value) return make_error(ErrorCode::parse_error, where_ + ": key '" + key + "' is '" + name + "', not one of: " + enum_choices<E>());
    out = *value;
    return Status::success();
  }

  Reader child(const char* key) const {
    auto it = object_.find(key);
    return Reader(it != object_.end() && it->is_object() ? *it : empty(), where_ + "." + key);
  }

 private:
  static const json& empty() {
    static const json object = json::object();
    return object;
  }
  const json& object_;
  std::string where_;
};

// A shipped GPU is named; any other (a --gpu file) travels inside the plan, so
// that train, compare and export read the plan without that file.
json gpu_field(const GpuProfile& gpu) {
  const std::vector<std::string> shipped = shipped_gpu_names();
  if (std::find(shipped.begin(), shipped.end(), gpu.name) != shipped.end()) {
    const auto unedited = load_gpu(gpu.name);
    if (unedited && unedited.value() == gpu) return gpu.name;
  }
  return json::parse(gpu_profile_to_json(gpu));
}

// The request's training block; the transformers release only where an hf profile runs the model.
json training_to_json(const TrainingOptions& t) {
  json training{{"precision", enum_name(t.precision)},
                {"optimizer", enum_name(t.optimizer)},
                {"recompute", enum_name(t.recompute)},
                {"activation_profile", enum_name(t.activation_profile)},
                {"micro_batch_size", t.micro_batch_size},
                {"seq_len", t.seq_len},
                {"num_micro_batches", t.num_micro_batches},
                {"torch_compile", t.torch_compile}};
  if (runs_hugging_face_modules(t.activation_profile)) training["transformers_version"] = to_string(t.transformers_version);
  if (t.recompute == RecomputeMode::full) training["recompute_num_layers"] = t.recompute_num_layers;  // 0: every block
  return training;
}

}  // namespace

Result<json> parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return make_error(ErrorCode::parse_error, source + ": not valid JSON: " + one_line(e.what(), 160));
  }
}

json model_to_json(const Model& m) {
  const ModelConfig& c = m.config;
  return json{{"name", c.name},
              {"model_type", c.model_type},
              {"parameter_count", m.parameter_count},
              {"num_layers", c.num_layers},
              {"hidden_size", c.hidden_size},
              {"num_attention_heads", c.num_heads},
              {"num_key_value_heads", c.num_kv_heads},
              {"intermediate_size", c.intermediate_size},
              {"vocab_size", c.vocab_size},
              {"tie_word_embeddings", c.tie_word_embeddings}};
}

json request_to_json(const EstimateRequest& r) {
  const auto& l = r.layout;
  const auto& a = r.assumptions;
  return json{{"plugin", enum_name(r.plugin.kind)},
              {"runtime", enum_name(r.plugin.runtime)},
              {"settings", settings_json(r.plugin, l, r.training)},
              {"layout", json{{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"cp", l.cp}, {"dp_replicate", l.dp_replicate}, {"sequence_parallel", l.sequence_parallel}, {"world_size", l.world_size()}}},
              {"training", training_to_json(r.training)},
              {"assumptions", json{{"cuda_context_bytes", a.cuda_context_bytes},
                                   {"allocator_reserve_fraction", a.allocator_reserve_fraction},
                                   {"nccl_bytes_per_group", a.nccl_bytes_per_group},
                                   {"cublas_workspace_bytes", a.cublas_workspace_bytes},
                                   {"memory_headroom_bytes", a.memory_headroom_bytes},
                                   {"memory_headroom_fraction", a.memory_headroom_fraction}}}};
}

Result<EstimateRequest> request_from_json(const json& object, const std::string& source) {
  EstimateRequest r;
  const Reader root(object, source);
  const Reader settings = root.child("settings"), layout = root.child("layout"), training = root.child("training"),
               assumptions = root.child("assumptions");
  double bucket_mb = 25, reduce_bucket_m = 12;
  for (Status s : {root.read_enum("plugin", r.plugin.kind), root.read_enum("runtime", r.plugin.runtime),
                   settings.read("stage3_param_persistence_threshold", r.plugin.deepspeed.param_persistence_threshold),
                   settings.read("stage3_prefetch_bucket_size", r.plugin.deepspeed.prefetch_bucket_size),
                   settings.read("stage3_max_live_parameters", r.plugin.deepspeed.max_live_parameters),
                   settings.read("stage3_max_reuse_distance", r.plugin.deepspeed.max_reuse_distance),
                   settings.read("reduce_bucket_size", r.plugin.deepspeed.reduce_bucket_size),
                   settings.read("sub_group_size", r.plugin.deepspeed.sub_group_size),
                   settings.read("offload_param", r.plugin.deepspeed.offload_param), layout.read("dp", r.layout.dp), layout.read("tp", r.layout.tp),
                   layout.read("pp", r.layout.pp), layout.read("cp", r.layout.cp), layout.read("dp_replicate", r.layout.dp_replicate), layout.read("sequence_parallel", r.layout.sequence_parallel),
                   training.read_enum("precision", r.training.precision), training.read_enum("optimizer", r.training.optimizer),
                   training.read_enum("recompute", r.training.recompute), training.read("recompute_num_layers", r.training.recompute_num_layers),
                   training.read_enum("activation_profile", r.training.activation_profile),
                   training.read("micro_batch_size", r.training.micro_batch_size), training.read("seq_len", r.training.seq_len),
                   training.read("num_micro_batches", r.training.num_micro_batches), training.read("torch_compile", r.training.torch_compile),
                   assumptions.read("cuda_context_bytes", r.assumptions.cuda_context_bytes),
                   assumptions.read("allocator_reserve_fraction", r.assumptions.allocator_reserve_fraction),
                   assumptions.read("nccl_bytes_per_group", r.assumptions.nccl_bytes_per_group),
                   assumptions.read("cublas_workspace_bytes", r.assumptions.cublas_workspace_bytes),
                   assumptions.read("memory_headroom_bytes", r.assumptions.memory_headroom_bytes),
                   assumptions.read("memory_headroom_fraction", r.assumptions.memory_headroom_fraction),
                   settings.read("bucket_cap_mb", bucket_mb), settings.read("gradient_as_bucket_view", r.plugin.gradient_as_bucket_view),
                   settings.read("rank_order_reduction", r.plugin.rank_order_reduction),
                   settings.read_enum("sharding_strategy", r.plugin.fsdp_strategy), settings.read("cpu_offload", r.plugin.cpu_offload),
                   settings.read("reduce_bucket_size_in_m", reduce_bucket_m),
                   settings.read_enum("placement_policy", r.plugin.gemini.placement_policy),
                   settings.read("shard_param_frac", r.plugin.gemini.shard_param_frac),
                   settings.read("offload_optim_frac", r.plugin.gemini.offload_optim_frac),
                   settings.read("offload_param_frac", r.plugin.gemini.offload_param_frac),
                   settings.read("chunk_size", r.plugin.gemini.chunk_size), settings.read("search_range_m", r.plugin.gemini.search_range_m),
                   settings.read("min_chunk_size_m", r.plugin.gemini.min_chunk_size_m),
                   settings.read("hidden_dim", r.plugin.gemini.search_interval), settings.read("pin_memory", r.plugin.pin_memory),
                   settings.read_enum("pp_style", r.plugin.pp_schedule),
                   settings.read("num_model_chunks", r.plugin.num_model_chunks), settings.read("tp_comm_overlap", r.plugin.tp_comm_overlap),
                   settings.read("overlap_param_gather", r.plugin.overlap_param_gather),
                   settings.read("cross_entropy_loss_fusion", r.plugin.cross_entropy_loss_fusion),
                   settings.read("grad_reduce_after_backward", r.plugin.grad_reduce_after_backward),
                   settings.read("no_overlap_p2p_comm", r.plugin.no_overlap_p2p_comm),
                   settings.read("pipeline_scatter_gather", r.plugin.pipeline_scatter_gather),
                   settings.read("no_gradient_accumulation_fusion", r.plugin.no_gradient_accumulation_fusion),
                   settings.read("grad_reduce_in_bf16", r.plugin.grad_reduce_in_bf16),
                   settings.read("fp8_param_gather", r.plugin.fp8_param_gather), settings.read("fused_rmsnorm", r.plugin.fused_rmsnorm),
                   settings.read("compile_model_only", r.plugin.compile_model_only)}) {
    if (!s) return s.error();
  }
  std::string transformers;
  if (Status s = training.read("transformers_version", transformers); !s) return s.error();
  if (!transformers.empty()) {
    const auto version = parse_transformers_version(transformers);
    if (!version) return make_error(ErrorCode::parse_error, source + ".training: key 'transformers_version' is '" + transformers + "', not X.Y (e.g. 4.32)");
    r.training.transformers_version = *version;
  }
  int stage = -1;
  if (Status s = settings.read(r.plugin.kind == PluginKind::low_level_zero ? "stage" : "zero_stage", stage); !s) return s.error();
  r.plugin.zero_stage = stage;
  // Bounded as --bucket-mb and --reduce-bucket-m are: a huge double would not convert to int64 (undefined behaviour).
  for (auto [key, mib] : {std::pair{"bucket_cap_mb", bucket_mb}, std::pair{"reduce_bucket_size_in_m", reduce_bucket_m}}) {
    if (!(mib >= 0 && mib <= 1e9)) {
      return make_error(ErrorCode::parse_error, source + ".settings: key '" + key + "' must lie in [0, 1e9], got " + format_number(mib));
    }
  }
  r.plugin.bucket_bytes = static_cast<int64_t>(bucket_mb * (1 << 20));
  r.plugin.reduce_bucket_numel = static_cast<int64_t>(reduce_bucket_m * (1 << 20));
  return r;
}

json ranks_to_json(const MemoryEstimate& e) {
  json ranks = json::array();
  for (const RankMemory& row : e.ranks) {
    json categories = json::object();
    for (MemoryCategory c : kAllMemoryCategories) {
      categories[std::string(to_string(c))] = json{{"device_bytes", row.bytes[c].device}, {"host_bytes", row.bytes[c].host}};
    }
    json layers = row.last_layer >= row.first_layer ? json::array({row.first_layer, row.last_layer}) : json(nullptr);
    json chunks = json::array();  // interleaved: each model chunk's first and last block
    for (const StageLayers& chunk : row.layer_chunks) chunks.push_back(json::array({chunk.first_layer, chunk.first_layer + chunk.num_layers - 1}));
    ranks.push_back(json{{"ranks", json::array({row.first_rank, row.last_rank})},
                         {"layer_chunks", chunks},
                         {"pipeline_stages", json::array({row.first_stage, row.last_stage})},
                         {"layers", layers},
                         {"has_embedding", row.has_embedding},
                         {"has_head", row.has_head},
                         {"in_flight_micro_batches", row.in_flight_micro_batches},
                         {"categories", categories},
                         {"total", json{{"device_bytes", row.device_total}, {"host_bytes", row.host_total}}},
                         {"retained_between_steps_bytes", row.retained_between_steps},
                         {"gpu_capacity_bytes", row.gpu_capacity},
                         {"margin_bytes", row.margin},
                         {"fits", row.fits()}});
  }
  return ranks;
}

json cluster_to_json(const ClusterSpec& c) {
  return json{{"name", c.name},
              {"gpu", gpu_field(c.gpu)},
              {"num_nodes", c.num_nodes},
              {"gpus_per_node", c.gpus_per_node},
              {"inter_node_gbps", c.inter_node_gbit_s},
              {"inter_node_latency_us", c.inter_node_latency_s * 1e6},
              {"intra_node_gbps", c.intra_node_gbps},
              {"host_memory_gib_per_node", static_cast<double>(c.host_memory_bytes_per_node) / 1073741824.0},
              {"cpu_adam_gparams_per_s_per_node", c.cpu_adam_params_per_s_per_node / 1e9}};
}

json breakdown_to_json(const StepBreakdown& b) {
  return json{{"forward_s", b.forward_s},         {"backward_s", b.backward_s}, {"recompute_s", b.recompute_s},
              {"communication_s", b.communication_s}, {"offload_s", b.offload_s},   {"optimizer_s", b.optimizer_s},
              {"bubble_s", b.bubble_s}};
}

}  // namespace tessera::planner
