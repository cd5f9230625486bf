// What each --runtime accepts: the plugin its model states describe, and the
// settings the runtime has (model_states.h). Messages name the option and the fix.
#include <string>

#include "model_states.h"

#include "tessera/planner/deepspeed_pipeline.h"
#include "tessera/planner/op_checkpoint_policy.h"
#include "tessera/planner/runtime_models.h"

namespace tessera::planner {
namespace {

Error invalid(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

Status needs_plugin(Runtime runtime, PluginKind got, const char* what) {
  const PluginKind wanted = runtime_plugin(runtime);
  if (got == wanted) return Status::success();
  return invalid("--runtime " + std::string(enum_name(runtime)) + " models " + what + ": use --plugin " + std::string(enum_name(wanted)) +
                 " (got " + std::string(enum_name(got)) + ")");
}

Status check_deepspeed(const PluginOptions& p, const TrainingOptions& t) {
  if (p.effective_zero_stage() != 3) {
    return invalid("--runtime deepspeed models ZeRO-3: use --zero-stage 3 (its default there), --plugin hybrid_parallel for its pipeline "
                   "engine at stage 1, or --runtime colossalai for stages 1 and 2");
  }
  // Under ZeRO-Offload DeepSpeed's engine refuses any optimizer but its CPU
  // Adam (or Lion) unless told to force it (engine.py at edaa722, _configure_optimizer).
  if (p.cpu_offload && (t.optimizer == OptimizerKind::sgd || t.optimizer == OptimizerKind::sgd_momentum)) {
    return invalid("--cpu-offload under --runtime deepspeed steps with DeepSpeedCPUAdam: use --optimizer adam or adamw (got " +
                   std::string(enum_name(t.optimizer)) + ")");
  }
  const DeepSpeedZero3Options& z = p.deepspeed;
  for (auto [option, value] : {std::pair{"--stage3-param-persistence-threshold", z.param_persistence_threshold},
                               std::pair{"--stage3-prefetch-bucket-size", z.prefetch_bucket_size},
                               std::pair{"--stage3-max-live-parameters", z.max_live_parameters},
                               std::pair{"--stage3-max-reuse-distance", z.max_reuse_distance},
                               std::pair{"--reduce-bucket-size", z.reduce_bucket_size},
                               std::pair{"--sub-group-size", z.sub_group_size}}) {
    if (value < 0 || value > (int64_t{1} << 50)) {
      return invalid(std::string(option) + " must be a number of elements from 0 to 1125899906842624, got " + std::to_string(value));
    }
  }
  return Status::success();
}

// DeepSpeed's pipeline engine as deepspeed_pipeline.h reads it: the BF16_Optimizer
// or DeepSpeedZeroOptimizer at stage 1, the 1F1B TrainSchedule, gradients reduced
// after it; none of Megatron-Core's overlaps.
Status check_deepspeed_pipeline(const EstimateRequest& r) {
  const PluginOptions& p = r.plugin;
  const std::string engine = "--runtime deepspeed --plugin hybrid_parallel (DeepSpeed's pipeline engine)";
  if (!deepspeed_pipeline_precision(r.training.precision)) {
    return invalid(engine + " is modelled in bf16 (its BF16_Optimizer) and fp16 (DeepSpeedZeroOptimizer): use --precision bf16 or fp16, "
                   "or --runtime colossalai for " + std::string(enum_name(r.training.precision)));
  }
  if (p.effective_zero_stage() != 1) {
    return invalid(engine + " is modelled at ZeRO stage 1, the fp32 states sharded over dp: use --zero-stage 1 (its default there), not " +
                   std::to_string(p.effective_zero_stage()));
  }
  if (p.pp_schedule != PipelineSchedule::one_f_one_b) {
    return invalid(engine + " runs its 1F1B TrainSchedule: use --pp-schedule 1f1b");
  }
  if (r.layout.cp > 1) return invalid(engine + " has no context parallelism: use --cp 1");
  if (r.layout.dp_replicate > 1) return invalid(engine + " shards over every data-parallel rank: use --dp-replicate 1");
  if (p.cpu_offload) return invalid("--cpu-offload is not modelled for " + engine + "; drop it");
  if (p.tp_comm_overlap || p.overlap_param_gather) {
    return invalid("--tp-comm-overlap and --overlap-param-gather are Megatron-Core's: drop them under " + engine);
  }
  return Status::success();
}

}  // namespace

Status check_op_selective(const ModelConfig& c, const EstimateRequest& r) {
  if (r.training.recompute != RecomputeMode::op_selective) return Status::success();
  if (r.plugin.runtime != Runtime::torchtitan) {
    return invalid("--recompute op_selective is torchtitan's op-level checkpointing: use it with --runtime torchtitan --plugin torch_fsdp, "
                   "or --recompute selective or full");
  }
  if (r.training.activation_profile != ActivationProfile::flash) {
    return invalid("--recompute op_selective keeps what torchtitan keeps with SDPA's flash kernel: use --activation-profile flash (got " +
                   std::string(enum_name(r.training.activation_profile)) + ")");
  }
  if (!is_torchtitan_llama_block(c)) {
    return invalid("--recompute op_selective follows torchtitan's Llama block (separate q, k, v projections, SwiGLU, no dropout), which " +
                   c.name + " is not; use --recompute selective or full");
  }
  return Status::success();
}

Status check_runtime_model(const ModelConfig& c, const EstimateRequest& r) {
  const TrainingOptions& t = r.training;
  if (r.plugin.runtime == Runtime::megatron) {
    if (const std::optional<std::string> what = megatron_cannot_build(c, t.seq_len)) {
      return invalid("--runtime megatron: " + c.name + " has " + *what + ", which Megatron-Core's GPT model does not build; plan it under --runtime colossalai");
    }
    if (t.activation_profile != ActivationProfile::flash && t.activation_profile != ActivationProfile::megatron) {
      return invalid("--runtime megatron keeps what Transformer Engine's fused attention keeps: use --activation-profile flash (or megatron, "
                     "Korthikanti's unfused core), not " + std::string(enum_name(t.activation_profile)));
    }
    if (t.torch_compile) return invalid("--torch-compile: Megatron-LM does not run torch.compile; drop it under --runtime megatron");
  }
  return Status::success();
}

Status check_runtime(const EstimateRequest& r) {
  const PluginOptions& p = r.plugin;
  if (p.deepspeed.offload_param && p.runtime != Runtime::deepspeed) {
    return invalid("--offload-param is DeepSpeed ZeRO-3's offload_param: use it with --runtime deepspeed (gemini: --offload-param-frac; "
                   "torch_fsdp: --cpu-offload)");
  }
  // The planner's FP8 is Transformer Engine's layers as Megatron-Core runs them
  // (fp8.h), which only --to megatron sets up; ColossalAI's FP8 (torch._scaled_mm
  // in its own layers), DeepSpeed's and torchtitan's (torchao's Float8Linear) are
  // other recipes, with other state and other casts, and are not modelled.
  if (r.training.precision == Precision::fp8 && p.runtime != Runtime::megatron) {
    return invalid("--precision fp8 counts Transformer Engine's FP8 layers as Megatron-Core runs them: add --runtime megatron (" +
                   std::string(enum_name(p.runtime)) + "'s own FP8 is not modelled; use --precision bf16 there)");
  }
  switch (p.runtime) {
    case Runtime::colossalai: return Status::success();
    case Runtime::megatron: {
      if (Status s = needs_plugin(p.runtime, p.kind, "Megatron-Core's data, tensor and pipeline parallelism"); !s) return s;
      if (p.effective_zero_stage() > 1) {
        return invalid("--zero-stage " + std::to_string(p.effective_zero_stage()) +
                       " under --runtime megatron: Megatron-Core shards only the optimizer; use --zero-stage 1 (its distributed optimizer) or 0");
      }
      if (p.cpu_offload) return invalid("--cpu-offload is not modelled under --runtime megatron; drop it");
      return Status::success();
    }
    case Runtime::torchtitan: {
      if (Status s = needs_plugin(p.runtime, p.kind, "FSDP2"); !s) return s;
      if (r.training.precision == Precision::fp16) {
        return invalid("--precision fp16 under --runtime torchtitan: its mixed_precision_param is bfloat16 or float32; use --precision bf16 or fp32");
      }
      // torchtitan applies FSDP only where a replica has 2 shards or more
      // (v0.2.2 ParallelDims.fsdp_enabled: dp_shard > 1 or cp > 1); with one it
      // runs DDP (llama3/infra/parallelize.py, apply_ddp), whose states are not these.
      if (r.layout.shard_ranks() == 1) {
        return invalid("--runtime torchtitan shards over 2 ranks or more per replica (FSDP2; with one, torchtitan runs DDP, which is not modelled): "
                       "use --dp 2 or more, or a --dp-replicate that leaves 2 ranks or more in each replica");
      }
      // torchtitan's activation_checkpoint modes are none, full, and selective by
      // layer or by op (torchtitan/config_manager.py, ActivationCheckpoint), not
      // Korthikanti's attention core.
      if (r.training.recompute == RecomputeMode::selective) {
        return invalid("--recompute selective (the attention core) is not one of torchtitan's checkpointing modes: use --recompute none, full "
                       "or op_selective (its selective_ac_option \"op\")");
      }
      return Status::success();
    }
    case Runtime::deepspeed: {
      if (p.deepspeed_pipeline()) return check_deepspeed_pipeline(r);
      if (Status s = needs_plugin(p.runtime, p.kind, "DeepSpeed ZeRO-3 (or, with --plugin hybrid_parallel, its pipeline engine)"); !s) return s;
      return check_deepspeed(p, r.training);
    }
  }
  return Status::success();
}

}  // namespace tessera::planner
