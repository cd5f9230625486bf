// `tessera export --to deepspeed`: ds_config.json for the plans DeepSpeed's ZeRO
// expresses. Keys as DeepSpeed's config reference spells them
// (deepspeed/runtime/zero/config.py: DeepSpeedZeroConfig; offload_config.py).
//
//   torch_ddp                  stage 0, reduce_bucket_size = bucket_cap_mb in elements
//   low_level_zero             stage 1 or 2; cpu_offload -> offload_optimizer cpu
//   torch_fsdp                 full_shard -> stage 3; shard_grad_op (ZeRO-2 semantics) -> stage 2
//   gemini                     shard_param_frac 1 -> stage 3 (0 -> stage 2); offload_optim_frac 1 ->
//                              offload_optimizer cpu; offload_param_frac 1 -> offload_param cpu.
//                              DeepSpeed offloads all of a kind or none: fractions strictly
//                              between 0 and 1 have no equivalent and are an error.
//   hybrid_parallel            only without tensor and pipeline parallelism: DeepSpeed's
//                              engine alone has no Megatron tensor parallelism, and its
//                              PipelineModule needs the model rewritten as a layer list.
#include <cmath>

#include "export_internal.h"
#include "tessera/planner/export.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::ordered_json;
using export_detail::cannot_express;

constexpr int64_t kDeepSpeedDefaultBucket = 500000000;  // DeepSpeedZeroConfig.reduce_bucket_size

bool is_zero_or_one(double fraction) { return fraction == 0.0 || fraction == 1.0; }

struct ZeroSettings {
  int stage = 0;
  bool offload_optimizer = false;
  bool offload_param = false;
  int64_t reduce_bucket_elements = kDeepSpeedDefaultBucket;
};

// Gemini's placement as it runs: the legacy policies' implied fractions, "auto"
// as the memory model resolves it on the plan's GPU.
Result<GeminiSummary> gemini_fractions(const PlanFile& file, const EstimateRequest& r) {
  const GeminiOptions& g = r.plugin.gemini;
  GeminiSummary s;
  switch (g.placement_policy) {
    case GeminiPlacement::cuda: return s;
    case GeminiPlacement::cpu:
      s.offload_optim_frac = s.offload_param_frac = 1;
      return s;
    case GeminiPlacement::static_placement:
      s.shard_param_frac = g.shard_param_frac;
      s.offload_optim_frac = g.offload_optim_frac;
      s.offload_param_frac = g.offload_param_frac;
      return s;
    case GeminiPlacement::auto_placement: break;
  }
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  auto memory = estimate_memory(model.value(), file.cluster.gpu, r);
  if (!memory) return memory.error();
  if (!memory->gemini) return make_error(ErrorCode::unsupported, "--to deepspeed: the memory model resolved no Gemini placement");
  return *memory->gemini;
}

Result<ZeroSettings> zero_settings(const PlanFile& file, const EstimateRequest& r) {
  const PluginOptions& p = r.plugin;
  const int64_t element_bytes = compute_bytes(r.training.precision);
  ZeroSettings z;
  switch (p.kind) {
    case PluginKind::torch_ddp:
      z.reduce_bucket_elements = std::max<int64_t>(1, p.bucket_bytes / element_bytes);
      return z;
    case PluginKind::torch_fsdp:
      z.stage = p.fsdp_strategy == FsdpStrategy::full_shard ? 3 : 2;
      return z;
    case PluginKind::low_level_zero:
      z.stage = p.effective_zero_stage();
      z.offload_optimizer = p.cpu_offload;
      z.reduce_bucket_elements = p.reduce_bucket_numel;
      return z;
    case PluginKind::gemini: {
      auto placement = gemini_fractions(file, r);
      if (!placement) return placement.error();
      const GeminiSummary& g = placement.value();
      const std::string policy = p.gemini.placement_policy == GeminiPlacement::auto_placement
                                     ? "auto placement (as Tessera resolves it on " + file.cluster.gpu.name + ")"
                                     : std::string(enum_name(p.gemini.placement_policy)) + " placement";
      for (const auto& [name, value] : {std::pair{"shard_param_frac", g.shard_param_frac}, std::pair{"offload_optim_frac", g.offload_optim_frac},
                                        std::pair{"offload_param_frac", g.offload_param_frac}}) {
        if (!is_zero_or_one(value)) {
          return cannot_express("deepspeed", "Gemini's " + policy + " has " + std::string(name) + " " + format_number(value) +
                                                 ", and DeepSpeed has no equivalent: its ZeRO shards and offloads all of the parameters or optimizer "
                                                 "states or none; export this plan --to colossalai, or pick a plan whose fractions are 0 or 1");
        }
      }
      if (g.shard_param_frac == 0 && g.offload_param_frac == 1) {
        return cannot_express("deepspeed", "offload_param needs ZeRO stage 3, but Gemini's shard_param_frac 0 keeps the parameters replicated (stage 2)");
      }
      z.stage = g.shard_param_frac == 1 ? 3 : 2;
      z.offload_optimizer = g.offload_optim_frac == 1;
      z.offload_param = g.offload_param_frac == 1;
      if (p.gemini.chunk_size > 0) z.reduce_bucket_elements = p.gemini.chunk_size;  // Gemini reduces whole chunks
      return z;
    }
    case PluginKind::hybrid_parallel:
      if (r.layout.tp > 1 || r.layout.pp > 1) {
        return cannot_express("deepspeed", "the plan uses tensor parallelism " + std::to_string(r.layout.tp) + " × pipeline " +
                                               std::to_string(r.layout.pp) +
                                               ", and DeepSpeed alone does not do Megatron tensor parallelism (that takes Megatron-DeepSpeed) and runs "
                                               "a pipeline only on a model rewritten as a PipelineModule; export this plan --to colossalai, or "
                                               "pick a plan with tp 1 and pp 1");
      }
      z.stage = p.effective_zero_stage();
      z.offload_optimizer = p.cpu_offload;
      z.reduce_bucket_elements = p.reduce_bucket_numel;
      return z;
  }
  return make_error(ErrorCode::invalid_argument, "--to deepspeed: unknown plugin");
}

ordered_json optimizer_json(OptimizerKind kind) {
  // The learning rate is a placeholder: Tessera plans memory and speed, not the schedule.
  const double lr = 1e-4;
  switch (kind) {
    case OptimizerKind::adam:
      // DeepSpeed's "Adam" runs AdamW unless adam_w_mode is false (deepspeed/runtime/config.py, ADAM_W_MODE_DEFAULT).
      return {{"type", "Adam"}, {"params", {{"lr", lr}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"adam_w_mode", false}}}};
    case OptimizerKind::adamw:
      return {{"type", "AdamW"}, {"params", {{"lr", lr}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.01}}}};
    case OptimizerKind::sgd: return {{"type", "SGD"}, {"params", {{"lr", lr}}}};
    case OptimizerKind::sgd_momentum: return {{"type", "SGD"}, {"params", {{"lr", lr}, {"momentum", 0.9}}}};
  }
  return {};
}

}  // namespace

Result<std::string> export_deepspeed(const PlanFile& file, size_t plan_index) {
  if (Status s = export_detail::check_plan(file, plan_index); !s) return s.error();
  const EstimateRequest& r = file.plans[plan_index];
  auto zero = zero_settings(file, r);
  if (!zero) return zero.error();
  const ZeroSettings& z = zero.value();
  const int64_t accumulation = export_detail::gradient_accumulation_steps(r);

  ordered_json config;
  config["train_batch_size"] = r.training.micro_batch_size * accumulation * r.layout.dp;
  config["train_micro_batch_size_per_gpu"] = r.training.micro_batch_size;
  config["gradient_accumulation_steps"] = accumulation;
  if (r.training.precision == Precision::bf16) config["bf16"] = {{"enabled", true}};
  if (r.training.precision == Precision::fp16) {
    // loss_scale 0: dynamic loss scaling, from 2^16, halved on overflow.
    config["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}, {"loss_scale_window", 1000}, {"hysteresis", 2}, {"min_loss_scale", 1}};
  }
  config["gradient_clipping"] = kMaxGradNorm;
  config["optimizer"] = optimizer_json(r.training.optimizer);
  ordered_json zero_json;
  zero_json["stage"] = z.stage;
  if (z.offload_optimizer) zero_json["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  if (z.offload_param) zero_json["offload_param"] = {{"device", "cpu"}, {"pin_memory", true}};
  zero_json["overlap_comm"] = true;
  zero_json["reduce_bucket_size"] = z.reduce_bucket_elements;
  zero_json["contiguous_gradients"] = true;
  config["zero_optimization"] = zero_json;
  // ZeRO refuses optimizers it has not tested (torch.optim.SGD) unless told.
  const bool sgd = r.training.optimizer == OptimizerKind::sgd || r.training.optimizer == OptimizerKind::sgd_momentum;
  if (sgd && z.stage > 0) config["zero_allow_untested_optimizer"] = true;
  config["steps_per_print"] = 10;
  config["wall_clock_breakdown"] = false;
  return config.dump(2) + "\n";
}

}  // namespace tessera::planner
