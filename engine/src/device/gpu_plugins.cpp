#include "tessera/engine/device/gpu_plugins.h"

#include <string>

#include "tessera/planner/enum_names.h"

namespace tessera::engine {

using planner::GeminiPlacement;
using planner::PluginKind;

namespace {

// Gemini's placements whose every chunk keeps its optimizer states and
// 16-bit shards on one side: all on the device (`cuda`, or `static` sending
// no optimizer state to the host, whatever its shard_param_frac), or all on
// the host (`cpu`, or `static` sending all of both).
Status check_gemini_placement(const planner::GeminiOptions& g) {
  if (g.placement_policy == GeminiPlacement::auto_placement) {
    return make_error(ErrorCode::unsupported, "--placement auto: Gemini on GPUs runs the cuda, cpu and static placements; use one of them");
  }
  if (g.placement_policy != GeminiPlacement::static_placement || g.offload_optim_frac == 0) return Status::success();
  if (g.shard_param_frac == 1 && g.offload_optim_frac == 1 && g.offload_param_frac == 1) return Status::success();
  return make_error(ErrorCode::unsupported, "--offload-optim-frac " + std::to_string(g.offload_optim_frac) +
                                                ": Gemini on GPUs keeps every chunk's optimizer states and shards on one side; use --offload-optim-frac 0, "
                                                "or 1 with --offload-param-frac 1 and --shard-param-frac 1 (or --placement cuda or cpu)");
}

}  // namespace

Status check_gpu_plugin(const planner::PluginOptions& plugin) {
  if (plugin.kind == PluginKind::gemini) return check_gemini_placement(plugin.gemini);
  if (plugin.kind != PluginKind::torch_ddp && plugin.kind != PluginKind::low_level_zero && plugin.kind != PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::unsupported, "--plugin " + std::string(enum_name(plugin.kind)) +
                                                  ": on GPUs the engine runs torch_ddp, low_level_zero, gemini and hybrid_parallel so far; use one of them");
  }
  if (plugin.kind == PluginKind::hybrid_parallel && plugin.effective_zero_stage() != 0) {
    return make_error(ErrorCode::unsupported, "--zero-stage " + std::to_string(plugin.effective_zero_stage()) +
                                                  ": hybrid_parallel on GPUs runs DDP over the data-parallel ranks (ZeRO stage 0) so far; use --zero-stage 0");
  }
  if (plugin.kind != PluginKind::low_level_zero) return Status::success();
  const int stage = plugin.effective_zero_stage();
  if (stage != 1 && stage != 2) {
    return make_error(ErrorCode::unsupported, "--zero-stage " + std::to_string(stage) + ": low_level_zero on GPUs runs ZeRO stage 1 or 2; use --zero-stage 1 or 2");
  }
  return Status::success();
}

namespace {

// A pipeline: hybrid_parallel's (as on the CPU), GPipe or 1F1B, DDP (ZeRO
// stage 0) over the data-parallel ranks of each stage, with or without tensor parallelism.
Status check_gpu_pipeline(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  const std::string pp = "--pp " + std::to_string(layout.pp);
  if (plugin.kind != PluginKind::hybrid_parallel) return make_error(ErrorCode::unsupported, pp + ": pipeline parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  if (plugin.effective_zero_stage() != 0) {
    return make_error(ErrorCode::unsupported, pp + " with --zero-stage " + std::to_string(plugin.effective_zero_stage()) +
                                                  ": on GPUs a pipeline runs DDP over each stage's data-parallel ranks; use --zero-stage 0");
  }
  if (plugin.pp_schedule == planner::PipelineSchedule::interleaved) {
    return make_error(ErrorCode::unsupported, pp + ": on GPUs a pipeline runs the gpipe and 1f1b schedules; use --pp-schedule 1f1b");
  }
  return Status::success();
}

}  // namespace

Status check_gpu_layout(const planner::PluginOptions& plugin, const planner::ParallelLayout& layout) {
  if (layout.pp > 1) {
    if (Status s = check_gpu_pipeline(plugin, layout); !s) return s;
  }
  if (layout.tp == 1) return Status::success();
  if (plugin.kind != PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::unsupported, "--tp " + std::to_string(layout.tp) + ": tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  }
  if (plugin.tp_comm_overlap) {
    return make_error(ErrorCode::unsupported,
                      "--tp-comm-overlap: the GPU step runs sequence parallelism's all-gathers and reduce-scatters between its GEMMs, not under them; leave it out");
  }
  return Status::success();
}

}  // namespace tessera::engine
