#include "tessera/engine/device/gpu_plugins.h"

#include <string>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/memory_model.h"

namespace tessera::engine {

using planner::PluginKind;

Status check_gpu_plugin(const planner::PluginOptions& plugin) {
  if (plugin.kind == PluginKind::gemini) return Status::success();  // every placement; `auto` as the planner solved it (GpuDataParallel)
  if (plugin.kind == PluginKind::torch_fsdp) return Status::success();  // full_shard and shard_grad_op, offloaded or not (src/cuda/fsdp_shards.h)
  if (plugin.kind != PluginKind::torch_ddp && plugin.kind != PluginKind::low_level_zero && plugin.kind != PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::unsupported, "--plugin " + std::string(enum_name(plugin.kind)) +
                                                  ": on GPUs the engine runs torch_ddp, torch_fsdp, low_level_zero, gemini and hybrid_parallel so far; use one of them");
  }
  if (plugin.kind == PluginKind::hybrid_parallel) {  // DDP, or ZeRO-1/2 over the data-parallel ranks of each tensor-parallel part
    if (plugin.effective_zero_stage() > 2) {
      return make_error(ErrorCode::unsupported, "--zero-stage " + std::to_string(plugin.effective_zero_stage()) +
                                                    ": hybrid_parallel on GPUs runs ZeRO stage 0, 1 or 2; use one of them");
    }
    if (plugin.cpu_offload && !plugin.cpu_offload_applies()) {
      return make_error(ErrorCode::invalid_argument, "--cpu-offload: hybrid_parallel offloads its ZeRO optimizer; use --zero-stage 1 or 2, or leave it out");
    }
    return Status::success();
  }
  if (plugin.kind != PluginKind::low_level_zero) return Status::success();
  const int stage = plugin.effective_zero_stage();
  if (stage != 1 && stage != 2) {
    return make_error(ErrorCode::unsupported, "--zero-stage " + std::to_string(stage) + ": low_level_zero on GPUs runs ZeRO stage 1 or 2; use --zero-stage 1 or 2");
  }
  return Status::success();
}

Status check_gpu_optimizer(planner::OptimizerKind optimizer) {
  if (optimizer == planner::OptimizerKind::adamw) return Status::success();
  return make_error(ErrorCode::unsupported, "--optimizer " + std::string(enum_name(optimizer)) + ": the GPU training step uses AdamW only; use --optimizer adamw");
}

namespace {

// A pipeline: hybrid_parallel's (as on the CPU), GPipe, 1F1B or interleaved, DDP (ZeRO
// stage 0) or ZeRO-1 over the data-parallel ranks of each stage, with or
// without tensor parallelism; ZeRO-2 is refused as the planner refuses it.
Status check_gpu_pipeline(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  const std::string pp = "--pp " + std::to_string(layout.pp);
  if (plugin.kind != PluginKind::hybrid_parallel) return make_error(ErrorCode::unsupported, pp + ": pipeline parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  const int zero_stage = plugin.effective_zero_stage();
  if (Status s = planner::check_zero_stage_with_pipeline("--zero-stage " + std::to_string(zero_stage), zero_stage, layout.pp); !s) return s;
  if ((plugin.pp_schedule == planner::PipelineSchedule::interleaved) != (plugin.num_model_chunks > 1)) {  // as the CPU engine's check_pipeline
    return make_error(ErrorCode::invalid_argument, pp + ": the interleaved schedule runs 2 or more model chunks per stage, the others one; set "
                                                        "--model-chunks with --pp-schedule interleaved only");
  }
  return Status::success();
}

// Context parallelism: hybrid_parallel's ring attention over dp × cp ranks
// (ZeRO stage 0, 1 or 2 over them; 0 or 1 in a pipeline, check_gpu_pipeline),
// beside tensor parallelism (each tp rank's ring over its heads) and
// pipelines (each stage's ring over its blocks).
Status check_gpu_context(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  if (plugin.kind == PluginKind::hybrid_parallel) return Status::success();
  return make_error(ErrorCode::unsupported, "--cp " + std::to_string(layout.cp) + ": context parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
}

}  // namespace

Status check_gpu_layout(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  // ZeRO-Offload and FSDP's offload move shards (src/cuda/zero_shards.h, fsdp_shards.h), which one data-parallel rank does not shard.
  if (plugin.cpu_offload && layout.data_ranks() < 2) {
    return make_error(ErrorCode::unsupported, "--cpu-offload: on GPUs the engine offloads the shards of 2 or more data-parallel ranks; give --dp 2 or more, "
                                              "or leave it out");
  }
  if (layout.pp > 1) {
    if (Status s = check_gpu_pipeline(plugin, layout); !s) return s;
  }
  if (layout.cp > 1) {
    if (Status s = check_gpu_context(plugin, layout); !s) return s;
  }
  if (layout.tp == 1) return Status::success();
  if (plugin.kind != PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::unsupported, "--tp " + std::to_string(layout.tp) + ": tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  }
  return Status::success();
}

}  // namespace tessera::engine
