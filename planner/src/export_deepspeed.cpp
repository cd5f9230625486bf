// `tessera export --to deepspeed`: ds_config.json for the plans DeepSpeed's ZeRO
// expresses. Keys as DeepSpeed's config reference spells them
// (deepspeed/runtime/zero/config.py: DeepSpeedZeroConfig; offload_config.py).
//
//   torch_ddp                  refused: see replicated_gradients_refusal
//   low_level_zero             stage 1 or 2 (stage 3 with its stage3_* knobs under --runtime deepspeed); cpu_offload -> offload_optimizer cpu;
//                              reduce_bucket_size = reduce_bucket_numel (the bucket the plan's
//                              reduction overlaps with backward); allgather_bucket_size at
//                              DeepSpeed's default, since the plan times one all-gather of the
//                              updated parameters without a bucket
//   torch_fsdp                 full_shard -> stage 3; shard_grad_op (ZeRO-2 semantics) -> stage 2; cpu_offload ->
//                              offload_param and offload_optimizer cpu at stage 3 (stage 2 cannot offload parameters: refused)
//   gemini                     shard_param_frac 1 -> stage 3 (0 -> stage 2); offload_optim_frac 1 ->
//                              offload_optimizer cpu; offload_param_frac 1 -> offload_param cpu.
//                              DeepSpeed offloads all of a kind or none: fractions strictly
//                              between 0 and 1 have no equivalent and are an error.
//   hybrid_parallel            only without tensor and pipeline parallelism: DeepSpeed's
//                              engine alone has no Megatron tensor parallelism, and its
//                              PipelineModule needs the model rewritten as a layer list;
//                              ZeRO stage 0 is refused as torch_ddp is.
// Refused as well: full recompute (recompute_refusal) and dropout the plan's
// activation profile does not count (export_dropout.cpp), which a config cannot turn off.
#include <cmath>

#include "export_internal.h"
#include "tessera/planner/export.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::ordered_json;
using export_detail::cannot_express;

constexpr int64_t kDeepSpeedDefaultBucket = 500000000;  // DeepSpeedZeroConfig.reduce_bucket_size and allgather_bucket_size

// Without ZeRO, DeepSpeed all-reduces the gradients after backward, at the
// accumulation boundary, in buffers of MEMORY_OPT_ALLREDUCE_SIZE (500,000,000)
// elements whatever reduce_bucket_size says (deepspeed/runtime/engine.py,
// DeepSpeedEngine.allreduce_gradients -> buffered_allreduce_fallback), while
// the plan's DDP all-reduces bucket by bucket under backward.
Error replicated_gradients_refusal(const EstimateRequest& r) {
  const std::string bucket = r.plugin.kind == PluginKind::torch_ddp ? format_number(static_cast<double>(r.plugin.bucket_bytes) / (1 << 20)) + " MiB buckets"
                                                                    : "buckets";
  return cannot_express("deepspeed", "the plan's " + std::string(enum_name(r.plugin.kind)) + " all-reduces gradients in " + bucket +
                                         " overlapped with backward, and DeepSpeed without ZeRO all-reduces them after backward in "
                                         "500,000,000-element buffers whatever reduce_bucket_size says; export this plan --to colossalai, or "
                                         "pick a ZeRO plan (--plugin low_level_zero)");
}

// DeepSpeed's activation_checkpointing section configures deepspeed.checkpointing
// (partition_activations, cpu_checkpointing, contiguous_memory_optimization,
// number_checkpoints, synchronize_checkpoint_boundary, profile: deepspeed/runtime/
// activation_checkpointing/checkpointing.py, configure and _configure_using_config_file;
// docs/code-docs/source/activation-checkpointing.rst), which acts only inside
// deepspeed.checkpointing.checkpoint() calls that the model's own code makes, as
// Megatron-DeepSpeed's does. A Hugging Face model makes none: it recomputes its
// blocks only after model.gradient_checkpointing_enable(), which no ds_config key
// calls, so a config alone cannot carry the plan's recompute.
// A plan of ColossalAI's states can go --to colossalai instead; one counted
// with DeepSpeed's own ZeRO-3 states cannot (check_runtime_matches).
Error recompute_refusal(Runtime runtime) {
  const std::string instead = runtime == Runtime::colossalai
                                  ? "export this plan --to colossalai (its script calls model.gradient_checkpointing_enable()), or pick a plan with --recompute none"
                                  : "pick a plan with --recompute none, or plan under --runtime colossalai and export that --to colossalai (its script "
                                    "calls model.gradient_checkpointing_enable())";
  return cannot_express("deepspeed", "the plan recomputes every block (recompute full), and a DeepSpeed config cannot turn that on for a "
                                     "Hugging Face model: its activation_checkpointing section only tunes deepspeed.checkpointing.checkpoint() "
                                     "calls the model makes, and transformers' models make none; " + instead);
}

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
  ZeroSettings z;
  switch (p.kind) {
    case PluginKind::torch_ddp: return replicated_gradients_refusal(r);
    case PluginKind::torch_fsdp:
      z.stage = p.fsdp_strategy == FsdpStrategy::full_shard ? 3 : 2;
      if (p.cpu_offload && z.stage == 2) {
        return cannot_express("deepspeed", "FSDP's cpu offload keeps the parameter shards on the host, and DeepSpeed offloads parameters only at "
                                           "ZeRO stage 3, while shard_grad_op is stage 2; export it --to colossalai, or pick full_shard");
      }
      z.offload_param = z.offload_optimizer = p.cpu_offload;
      return z;
    case PluginKind::low_level_zero:
      z.stage = p.effective_zero_stage();
      z.offload_optimizer = p.cpu_offload;
      z.offload_param = p.deepspeed.offload_param;
      z.reduce_bucket_elements = p.runtime == Runtime::deepspeed ? p.deepspeed.reduce_bucket_size : p.reduce_bucket_numel;
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
      if (z.stage == 0) return replicated_gradients_refusal(r);
      z.offload_optimizer = p.cpu_offload;
      z.reduce_bucket_elements = p.runtime == Runtime::deepspeed ? p.deepspeed.reduce_bucket_size : p.reduce_bucket_numel;
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
  if (r.training.recompute == RecomputeMode::full) return recompute_refusal(r.plugin.runtime);
  auto dropout = export_detail::uncounted_dropout(file, r);
  if (!dropout) return dropout.error();
  if (!dropout->empty()) {
    return cannot_express("deepspeed", "the plan's activation profile " + std::string(enum_name(r.training.activation_profile)) +
                                           " counts no dropout, and the model's config.json trains with " +
                                           export_detail::describe_dropout(dropout.value()) +
                                           ", which a DeepSpeed config cannot turn off; set them to 0 in config.json, or plan with "
                                           "--activation-profile flash, which counts dropout masks");
  }
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
  // pin_memory is DeepSpeed's default (offload_config.py); a plan counted without pinned buffers turns it off.
  if (z.offload_optimizer) zero_json["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", r.plugin.pin_memory}};
  if (z.offload_param) zero_json["offload_param"] = {{"device", "cpu"}, {"pin_memory", r.plugin.pin_memory}};
  zero_json["overlap_comm"] = true;
  zero_json["reduce_bucket_size"] = z.reduce_bucket_elements;
  if (z.stage == 1 || z.stage == 2) zero_json["allgather_bucket_size"] = kDeepSpeedDefaultBucket;  // stages 1 and 2 only read it
  zero_json["contiguous_gradients"] = true;
  if (r.plugin.runtime == Runtime::deepspeed) {  // the knobs the plan's ZeRO-3 model states were counted with
    zero_json["stage3_param_persistence_threshold"] = r.plugin.deepspeed.param_persistence_threshold;
    zero_json["stage3_prefetch_bucket_size"] = r.plugin.deepspeed.prefetch_bucket_size;
    zero_json["stage3_max_live_parameters"] = r.plugin.deepspeed.max_live_parameters;
    zero_json["stage3_max_reuse_distance"] = r.plugin.deepspeed.max_reuse_distance;
    zero_json["sub_group_size"] = r.plugin.deepspeed.sub_group_size;
  }
  config["zero_optimization"] = zero_json;
  // ZeRO refuses optimizers it has not tested (torch.optim.SGD) unless told.
  const bool sgd = r.training.optimizer == OptimizerKind::sgd || r.training.optimizer == OptimizerKind::sgd_momentum;
  if (sgd && z.stage > 0) config["zero_allow_untested_optimizer"] = true;
  config["steps_per_print"] = 10;
  // Every steps_per_print steps rank 0 logs its samples/s and peak memory
  // (utils/timer.py ThroughputTimer, at INFO), which `tessera compare` reads;
  // DeepSpeed's logger stands at WARNING unless log_level says otherwise
  // (utils/logging.py, runtime/config.py get_log_level, at edaa722).
  config["log_level"] = "info";
  config["wall_clock_breakdown"] = false;
  return config.dump(2) + "\n";
}

}  // namespace tessera::planner
