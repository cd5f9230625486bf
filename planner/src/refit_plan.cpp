#include "tessera/planner/refit_plan.h"

#include <algorithm>
#include <string>

namespace tessera::planner {

std::optional<EstimateRequest> refit_plan(const EstimateRequest& plan, const PlanRequest& request) {
  const ParallelLayout& l = plan.layout;
  const TrainingOptions& t = plan.training;
  const auto& plugins = request.plugins;
  if (!plugins.empty() && std::find(plugins.begin(), plugins.end(), plan.plugin.kind) == plugins.end()) return std::nullopt;
  if (plan.plugin.runtime != request.runtime) return std::nullopt;  // another runtime's states: not a plan of this search
  if (l.world_size() != request.cluster.world_size() || l.tp > request.cluster.gpus_per_node) return std::nullopt;
  for (auto [fixed, value] : {std::pair{request.dp, l.dp}, std::pair{request.tp, l.tp}, std::pair{request.pp, l.pp},
                              std::pair{request.micro_batch_size, t.micro_batch_size}}) {
    if (fixed > 0 && fixed != value) return std::nullopt;
  }
  if (request.zero_stage >= 0 && request.zero_stage != plan.plugin.effective_zero_stage()) return std::nullopt;
  if (t.micro_batch_size * t.num_micro_batches * l.dp != request.global_batch_size) return std::nullopt;
  EstimateRequest out = plan;
  apply_shared_training(request, out.training);
  out.plugin.pin_memory = request.pin_memory;
  out.plugin.fused_rmsnorm = request.fused_rmsnorm;  // torchtitan's, as the search sets them (search_templates.cpp)
  out.plugin.compile_model_only = request.compile_model_only;
  const auto& modes = request.recompute;
  if (!modes.empty() && std::find(modes.begin(), modes.end(), t.recompute) == modes.end()) {
    out.training.recompute = modes.front();
    // A count of blocks is full recompute's (recompute_blocks.h): the request's, or every block.
    out.training.recompute_num_layers = out.training.recompute == RecomputeMode::full ? request.recompute_num_layers : 0;
  }
  return out;
}

Result<EstimateRequest> carry_plan(const EstimateRequest& plan, const PlanRequest& request) {
  const auto refuse = [](const std::string& why) { return make_error(ErrorCode::invalid_argument, why); };
  const int64_t gpus = request.cluster.world_size();
  const int64_t model_parallel = plan.layout.tp * plan.layout.pp * plan.layout.cp;
  if (gpus % model_parallel != 0) {
    return refuse("its tp " + std::to_string(plan.layout.tp) + " × pp " + std::to_string(plan.layout.pp) +
                  (plan.layout.cp > 1 ? " × cp " + std::to_string(plan.layout.cp) : "") + " does not divide " + std::to_string(gpus) + " GPUs");
  }
  EstimateRequest carried = plan;
  carried.layout.dp = gpus / model_parallel;
  if (request.global_batch_size % carried.layout.dp != 0) {
    return refuse("a global batch of " + std::to_string(request.global_batch_size) + " does not split over its " + std::to_string(carried.layout.dp) +
                  " data-parallel ranks");
  }
  const int64_t per_rank = request.global_batch_size / carried.layout.dp;
  int64_t micro_batch = std::min(plan.training.micro_batch_size, per_rank);
  while (per_rank % micro_batch != 0) --micro_batch;
  carried.training.micro_batch_size = micro_batch;
  carried.training.num_micro_batches = per_rank / micro_batch;
  auto refit = refit_plan(carried, request);
  if (!refit) return refuse("the search for these inputs excludes its plugin, layout or micro-batch");
  return *refit;
}

}  // namespace tessera::planner
