// The estimate as JSON, schema 1. Byte counts are integers; names match the
// memory categories and the option spellings of the command line.
#include <nlohmann/json.hpp>

#include "report_facts.h"
#include "tessera/planner/flops.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

json model_json(const Model& m) {
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

json plugin_json(const PluginOptions& p) {
  json out{{"name", enum_name(p.kind)}};
  switch (p.kind) {
    case PluginKind::torch_ddp:
      out["bucket_cap_mb"] = static_cast<double>(p.bucket_bytes) / (1 << 20);
      out["gradient_as_bucket_view"] = p.gradient_as_bucket_view;
      break;
    case PluginKind::torch_fsdp: out["sharding_strategy"] = enum_name(p.fsdp_strategy); break;
    case PluginKind::low_level_zero:
      out["stage"] = p.effective_zero_stage();
      out["cpu_offload"] = p.cpu_offload;
      out["reduce_bucket_size_in_m"] = static_cast<double>(p.reduce_bucket_numel) / (1 << 20);
      break;
    case PluginKind::gemini:
      out["placement_policy"] = enum_name(p.gemini.placement_policy);
      out["shard_param_frac"] = p.gemini.shard_param_frac;
      out["offload_optim_frac"] = p.gemini.offload_optim_frac;
      out["offload_param_frac"] = p.gemini.offload_param_frac;
      out["search_range_m"] = p.gemini.search_range_m;
      out["min_chunk_size_m"] = p.gemini.min_chunk_size_m;
      out["hidden_dim"] = p.gemini.search_interval;
      break;
    case PluginKind::hybrid_parallel:
      out["zero_stage"] = p.effective_zero_stage();
      out["cpu_offload"] = p.cpu_offload;
      out["pp_style"] = enum_name(p.pp_schedule);
      break;
  }
  return out;
}

json rank_json(const RankMemory& row) {
  json categories = json::object();
  for (MemoryCategory c : kAllMemoryCategories) {
    categories[std::string(to_string(c))] = json{{"device_bytes", row.bytes[c].device}, {"host_bytes", row.bytes[c].host}};
  }
  json layers = row.last_layer >= row.first_layer ? json::array({row.first_layer, row.last_layer}) : json(nullptr);
  return json{{"ranks", json::array({row.first_rank, row.last_rank})},
              {"pipeline_stages", json::array({row.first_stage, row.last_stage})},
              {"layers", layers},
              {"has_embedding", row.has_embedding},
              {"has_head", row.has_head},
              {"in_flight_micro_batches", row.in_flight_micro_batches},
              {"categories", categories},
              {"total", json{{"device_bytes", row.device_total}, {"host_bytes", row.host_total}}},
              {"gpu_capacity_bytes", row.gpu_capacity},
              {"margin_bytes", row.margin},
              {"fits", row.fits()}};
}

}  // namespace

json estimate_to_json(const EstimateReport& r) {
  const auto& t = r.request.training;
  const auto& l = r.request.layout;
  const auto& a = r.request.assumptions;
  const FlopsPerToken flops = flops_per_token(r.model, t.seq_len, t.recompute);
  json ranks = json::array();
  for (const RankMemory& row : r.estimate.ranks) ranks.push_back(rank_json(row));
  json out{{"schema", 1},
           {"kind", "estimate"},
           {"model", model_json(r.model)},
           {"gpu", json{{"name", r.gpu.name}, {"display_name", r.gpu.display_name}, {"memory_bytes", r.gpu.memory_bytes}}},
           {"layout", json{{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"sequence_parallel", l.sequence_parallel}, {"world_size", l.world_size()}}},
           {"training", json{{"precision", enum_name(t.precision)},
                             {"optimizer", enum_name(t.optimizer)},
                             {"recompute", enum_name(t.recompute)},
                             {"activation_profile", enum_name(t.activation_profile)},
                             {"micro_batch_size", t.micro_batch_size},
                             {"seq_len", t.seq_len},
                             {"num_micro_batches", t.num_micro_batches}}},
           {"plugin", plugin_json(r.request.plugin)},
           {"assumptions", json{{"cuda_context_bytes", r.estimate.cuda_context_bytes},
                                {"allocator_reserve_fraction", a.allocator_reserve_fraction},
                                {"nccl_bytes_per_group", a.nccl_bytes_per_group},
                                {"cublas_workspace_bytes", a.cublas_workspace_bytes}}},
           {"flops_per_token", json{{"forward", flops.forward}, {"backward", flops.backward}, {"recompute", flops.recompute}}},
           {"ranks", ranks},
           {"fits", r.estimate.fits()},
           {"verdict", verdict_line(r.estimate)}};
  if (r.estimate.gemini) {
    const GeminiSummary& g = *r.estimate.gemini;
    out["gemini"] = json{{"chunk_size", g.chunk_size},
                         {"num_chunks", g.num_chunks},
                         {"waste_elements", g.waste_elements},
                         {"peak_gathered_chunks", g.peak_gathered_chunks},
                         {"shard_param_frac", g.shard_param_frac},
                         {"offload_optim_frac", g.offload_optim_frac},
                         {"offload_param_frac", g.offload_param_frac}};
  }
  return out;
}

}  // namespace tessera::planner
