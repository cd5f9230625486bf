#include "tessera/planner/export.h"

#include <cmath>

#include "export_internal.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"

namespace tessera::planner {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// A hand-edited plan must still describe the run of its file: the file's GPUs,
// global batch and sequence length, which the exports write beside the plan's
// own settings (a DeepSpeed train_batch_size, a launch over the cluster).
Status check_plan_matches_file(const PlanFile& file, const EstimateRequest& plan, const std::string& which) {
  const ParallelLayout& l = plan.layout;
  const TrainingOptions& t = plan.training;
  const auto mismatch = [&](const std::string& what) {
    return make_error(ErrorCode::invalid_argument, which + ": " + what + "; undo the edit or re-run `tessera plan`");
  };
  if (l.world_size() != file.cluster.world_size()) {
    return mismatch("layout dp " + str(l.dp) + " × tp " + str(l.tp) + " × pp " + str(l.pp) + " = " + str(l.world_size()) +
                    " GPUs, but the file's cluster has " + str(file.cluster.world_size()));
  }
  // validate_request bounds each factor, so the product stays far inside int64.
  const int64_t sequences = export_detail::sequences_per_step(plan);
  if (sequences != file.global_batch_size) {
    return mismatch("training.micro_batch_size " + str(t.micro_batch_size) + " × num_micro_batches " + str(t.num_micro_batches) + " × dp " +
                    str(l.dp) + " = " + str(sequences) + " sequences per step, but the file's global_batch_size is " + str(file.global_batch_size));
  }
  if (t.seq_len != file.seq_len) return mismatch("training.seq_len " + str(t.seq_len) + " differs from the file's seq_len " + str(file.seq_len));
  return Status::success();
}

}  // namespace

namespace export_detail {

Status check_plan(const PlanFile& file, size_t index) {
  if (file.plans.empty()) {
    return make_error(ErrorCode::invalid_argument, "--plan: the plan file holds no plans (nothing fit); run `tessera plan` with more GPUs");
  }
  if (index >= file.plans.size()) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(index + 1) + " is out of range: the plan file holds plans 1 to " +
                                                       std::to_string(file.plans.size()));
  }
  // A plan file edited by hand may hold settings the libraries would reject: check them as `tessera estimate` would.
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  const std::string which = "--plan " + std::to_string(index + 1);
  if (Status s = validate_request(model.value(), file.cluster.gpu, file.plans[index]); !s) {
    return make_error(ErrorCode::invalid_argument, which + ": " + s.error().message);
  }
  return check_plan_matches_file(file, file.plans[index], which);
}

const nlohmann::json& plan_json(const PlanFile& file, size_t index) {
  static const nlohmann::json empty = nlohmann::json::object();
  const auto plans = file.document.find("plans");
  if (plans == file.document.end() || !plans->is_array() || index >= plans->size() || !(*plans)[index].is_object()) return empty;
  return (*plans)[index];
}

std::string describe_cluster(const ClusterSpec& cluster) {
  return str(cluster.world_size()) + " × " + cluster.gpu.name + " (" + str(cluster.num_nodes) + " node" + (cluster.num_nodes > 1 ? "s" : "") + " × " +
         str(cluster.gpus_per_node) + ")";
}

std::string predicted_comment(const nlohmann::json& plan) {
  if (!plan.contains("peak_device_bytes") || !plan.contains("tokens_per_s")) return "";
  return "#   predicted: " + format_bytes(plan["peak_device_bytes"].get<int64_t>()) + " per GPU at most, " +
         str(std::llround(plan["tokens_per_s"].get<double>())) + " tokens/s\n";
}

int64_t gradient_accumulation_steps(const EstimateRequest& request) {
  return request.layout.pp > 1 ? 1 : request.training.num_micro_batches;
}

int64_t sequences_per_step(const EstimateRequest& request) {
  return request.training.micro_batch_size * request.training.num_micro_batches * request.layout.dp;
}

Error cannot_express(const char* target, const std::string& why) {
  return make_error(ErrorCode::unsupported, std::string("--to ") + target + ": " + why);
}

}  // namespace export_detail

namespace {

// The two targets whose checks follow; the others check their own plans.
bool exports_to_colossalai_or_deepspeed(ExportTarget target) { return target == ExportTarget::colossalai || target == ExportTarget::deepspeed; }

// A script or config runs the plan on its target's runtime, so the plan's model
// states must be that runtime's: ColossalAI's for --to colossalai, ColossalAI's
// ZeRO or DeepSpeed's ZeRO-3 for --to deepspeed.
Status check_runtime_matches(const PlanFile& file, size_t plan_index, ExportTarget target) {
  // A bad index is check_plan's to name; export_megatron and export_torchtitan check their own runtimes.
  if (plan_index >= file.plans.size() || !exports_to_colossalai_or_deepspeed(target)) return Status::success();
  const PluginOptions& plugin = file.plans[plan_index].plugin;
  if (plugin.deepspeed_pipeline()) {
    return export_detail::cannot_express(target == ExportTarget::colossalai ? "colossalai" : "deepspeed",
                                         "the plan counts DeepSpeed's pipeline engine, which runs a Megatron-DeepSpeed PipelineModule that no "
                                         "exported script or config sets up; plan again with --runtime deepspeed --plugin low_level_zero (its ZeRO-3), or --runtime colossalai");
  }
  const Runtime runtime = plugin.runtime;
  const bool matches = runtime == Runtime::colossalai || (target == ExportTarget::deepspeed && runtime == Runtime::deepspeed);
  if (matches) return Status::success();
  const char* to = target == ExportTarget::colossalai ? "colossalai" : "deepspeed";
  return export_detail::cannot_express(to, "the plan counts " + std::string(enum_name(runtime)) + "'s model states, which " + to +
                                               " would not keep; plan again with --runtime " + (target == ExportTarget::colossalai ? "colossalai" : "colossalai or deepspeed"));
}

// What the scripts and configs do not set up (FP8, Transformer Engine's as the
// plan counts it, is --runtime megatron's alone: validate_runtime.cpp): DeepSpeed has no ring attention
// (its sequence parallelism is Ulysses), and the ColossalAI script writes
// Megatron's split_gather sequence parallelism, not its ring_attn mode; nor do
// they give the sharding groups of hybrid sharding, nor compile the model; a
// DeepSpeed config recomputes no block.
Status check_plan_expressible(const PlanFile& file, size_t plan_index, ExportTarget target) {
  if (plan_index >= file.plans.size() || !exports_to_colossalai_or_deepspeed(target)) return Status::success();
  const EstimateRequest& plan = file.plans[plan_index];
  const char* to = target == ExportTarget::colossalai ? "colossalai" : "deepspeed";
  if (plan.layout.dp_replicate > 1) {
    return export_detail::cannot_express(to, "the plan shards over replicas of " + std::to_string(plan.layout.shard_ranks()) + " ranks (--dp-replicate " +
                                                 std::to_string(plan.layout.dp_replicate) + "), which a " + to +
                                                 " export does not set up; plan again with --dp-replicate 1");
  }
  if (plan.training.torch_compile) {
    return export_detail::cannot_express(to, std::string("the plan times the model under torch.compile (--torch-compile), which a ") + to +
                                                 " export does not set up; plan again without --torch-compile");
  }
  if (plan.layout.cp > 1) {
    return export_detail::cannot_express(to, "the plan splits each sequence over cp " + std::to_string(plan.layout.cp) +
                                                 " ranks (context parallelism), which a " + to + " export does not set up; plan again with --cp 1");
  }
  if (plan.training.recompute_num_layers > 0 && target == ExportTarget::deepspeed) {
    // A DeepSpeed config has no recompute (export_deepspeed.cpp); ColossalAI's pipelines can (export_colossalai.cpp).
    return export_detail::cannot_express(to, "the plan recomputes only the first " + std::to_string(plan.training.recompute_num_layers) +
                                                 " blocks of each chunk (--recompute-num-layers), which a DeepSpeed config does not set up; plan again "
                                                 "with --recompute none, or under --runtime megatron, torchtitan or colossalai");
  }
  return Status::success();
}

}  // namespace

Result<std::string> export_plan(const PlanFile& file, size_t plan_index, ExportTarget target) {
  if (Status s = check_runtime_matches(file, plan_index, target); !s) return s.error();
  if (Status s = check_plan_expressible(file, plan_index, target); !s) return s.error();
  switch (target) {
    case ExportTarget::colossalai: return export_colossalai(file, plan_index);
    case ExportTarget::deepspeed: return export_deepspeed(file, plan_index);
    case ExportTarget::megatron: return export_megatron(file, plan_index);
    case ExportTarget::perfetto: return export_perfetto(file, plan_index);
    case ExportTarget::torchtitan: return export_torchtitan(file, plan_index);
  }
  return make_error(ErrorCode::invalid_argument, "--to: unknown target");
}

}  // namespace tessera::planner
