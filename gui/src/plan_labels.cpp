#include "plan_labels.h"

namespace tessera::gui {

using planner::PluginKind;

int zero_stage_of(const planner::EstimateRequest& r) {
  switch (r.plugin.kind) {
    case PluginKind::torch_ddp: return 0;
    case PluginKind::torch_fsdp: return r.plugin.fsdp_strategy == planner::FsdpStrategy::full_shard ? 3 : 2;
    case PluginKind::gemini: return 3;
    case PluginKind::low_level_zero:
    case PluginKind::hybrid_parallel: return r.plugin.effective_zero_stage();
  }
  return 0;
}

QString offload_of(const planner::EstimateRequest& r, int64_t optimizer_chunks_on_host, int64_t chunks) {
  if (r.plugin.fsdp_offload()) return QStringLiteral("shards → host");
  // DeepSpeed's offload_param moves the 16-bit partitions too (--runtime deepspeed).
  if (r.plugin.cpu_offload && r.plugin.deepspeed.offload_param) return QStringLiteral("optim + params → host");
  if (r.plugin.cpu_offload) return QStringLiteral("optimizer → host");
  if (r.plugin.kind != PluginKind::gemini) return QStringLiteral("none");
  const auto& g = r.plugin.gemini;
  switch (g.placement_policy) {
    case planner::GeminiPlacement::auto_placement: return QStringLiteral("auto");
    case planner::GeminiPlacement::cpu: return QStringLiteral("all → host");
    case planner::GeminiPlacement::cuda: return QStringLiteral("none");
    case planner::GeminiPlacement::static_placement: break;
  }
  if (g.offload_optim_frac == 0 && g.offload_param_frac == 0) return QStringLiteral("none");
  if (optimizer_chunks_on_host >= 0 && g.offload_optim_frac < 1) {
    // ColossalAI's fraction is not a share of the states (planner/gemini_static_placement.h): say what it sends.
    return QStringLiteral("optim %1 of %2 chunks").arg(optimizer_chunks_on_host).arg(chunks);
  }
  if (g.offload_param_frac == 0) return QStringLiteral("optim %1%").arg(100 * g.offload_optim_frac);
  return QStringLiteral("optim %1% + param %2%").arg(100 * g.offload_optim_frac).arg(100 * g.offload_param_frac);
}

QString schedule_of(const planner::EstimateRequest& r) {
  if (r.layout.pp <= 1) return QStringLiteral("–");
  switch (r.plugin.pp_schedule) {
    case planner::PipelineSchedule::gpipe: return QStringLiteral("GPipe");
    case planner::PipelineSchedule::one_f_one_b: return QStringLiteral("1F1B");
    case planner::PipelineSchedule::interleaved: return QStringLiteral("interleaved × %1").arg(r.plugin.num_model_chunks);
  }
  return {};
}

QString seconds_text(double s) {
  if (s == 0) return QStringLiteral("0 s");  // nothing of that part, not a small amount of it
  if (s < 1e-3) return QStringLiteral("%1 µs").arg(s * 1e6, 0, 'f', 1);
  if (s < 1) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 1);
  return QStringLiteral("%1 s").arg(s, 0, 'f', 3);
}

}  // namespace tessera::gui
