#include "tessera/planner/refit_plan.h"

#include <algorithm>

namespace tessera::planner {

std::optional<EstimateRequest> refit_plan(const EstimateRequest& plan, const PlanRequest& request) {
  const ParallelLayout& l = plan.layout;
  const TrainingOptions& t = plan.training;
  const auto& plugins = request.plugins;
  if (!plugins.empty() && std::find(plugins.begin(), plugins.end(), plan.plugin.kind) == plugins.end()) return std::nullopt;
  if (l.world_size() != request.cluster.world_size() || l.tp > request.cluster.gpus_per_node) return std::nullopt;
  for (auto [fixed, value] : {std::pair{request.dp, l.dp}, std::pair{request.tp, l.tp}, std::pair{request.pp, l.pp},
                              std::pair{request.micro_batch_size, t.micro_batch_size}}) {
    if (fixed > 0 && fixed != value) return std::nullopt;
  }
  if (request.zero_stage >= 0 && request.zero_stage != plan.plugin.effective_zero_stage()) return std::nullopt;
  if (t.micro_batch_size * t.num_micro_batches * l.dp != request.global_batch_size) return std::nullopt;
  EstimateRequest out = plan;
  out.training.precision = request.precision;
  out.training.optimizer = request.optimizer;
  out.training.activation_profile = request.activation_profile;
  out.training.seq_len = request.seq_len;
  const auto& modes = request.recompute;
  if (!modes.empty() && std::find(modes.begin(), modes.end(), t.recompute) == modes.end()) out.training.recompute = modes.front();
  return out;
}

}  // namespace tessera::planner
