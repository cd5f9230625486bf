#include "layout_choice.h"

#include <string>

namespace tessera::gui {

using planner::PluginKind;

LayoutChoice layout_choice_of(const planner::EstimateRequest& plan) {
  LayoutChoice c;
  c.plugin = plan.plugin.kind;
  c.tp = plan.layout.tp;
  c.pp = plan.layout.pp;
  c.micro_batch = plan.training.micro_batch_size;
  c.schedule = plan.plugin.pp_schedule;
  c.model_chunks = plan.plugin.model_chunks();
  c.zero_stage = plan.plugin.effective_zero_stage();
  c.cpu_offload = plan.plugin.cpu_offload;
  c.recompute = plan.training.recompute;
  c.recompute_num_layers = plan.training.recompute_num_layers;
  c.sequence_parallel = plan.layout.sequence_parallel;
  c.cp = plan.layout.cp;
  c.dp_replicate = plan.layout.dp_replicate;
  return c;
}

Result<planner::EstimateRequest> layout_request(const LayoutChoice& c, const planner::EstimateRequest& plan, const planner::PlanRequest& inputs) {
  const auto refuse = [](const std::string& why) { return make_error(ErrorCode::invalid_argument, why); };
  const int64_t gpus = inputs.cluster.world_size();
  if (c.tp < 1 || c.pp < 1 || c.cp < 1 || c.dp_replicate < 1 || c.micro_batch < 1) {
    return refuse("tp, pp, cp, the replicas and the micro-batch must be at least 1");
  }
  if (gpus % (c.tp * c.pp * c.cp) != 0) {
    return refuse("--tp " + std::to_string(c.tp) + " × --pp " + std::to_string(c.pp) + (c.cp > 1 ? " × --cp " + std::to_string(c.cp) : "") +
                  " does not divide the " + std::to_string(gpus) + " GPUs");
  }
  const int64_t dp = gpus / (c.tp * c.pp * c.cp);
  if (inputs.global_batch_size % (dp * c.micro_batch) != 0) {
    return refuse("--global-batch " + std::to_string(inputs.global_batch_size) + " is not a whole number of micro-batches of " +
                  std::to_string(c.micro_batch) + " on each of the " + std::to_string(dp) + " data-parallel ranks");
  }
  planner::EstimateRequest r = plan;
  planner::apply_shared_training(inputs, r.training);
  r.training.recompute = c.recompute;
  r.training.recompute_num_layers = c.recompute == planner::RecomputeMode::full ? c.recompute_num_layers : 0;
  r.training.micro_batch_size = c.micro_batch;
  r.training.num_micro_batches = inputs.global_batch_size / (dp * c.micro_batch);
  r.assumptions = inputs.assumptions;
  r.layout = planner::ParallelLayout{dp, c.tp, c.pp, c.tp > 1 && c.sequence_parallel, c.cp};
  r.layout.dp_replicate = c.dp_replicate;
  if (r.plugin.kind != c.plugin) r.plugin = planner::PluginOptions{};  // another plugin starts from its defaults
  r.plugin.runtime = inputs.runtime;
  r.plugin.pin_memory = inputs.pin_memory;
  r.plugin.kind = c.plugin;
  const bool staged = c.plugin == PluginKind::low_level_zero || c.plugin == PluginKind::hybrid_parallel;
  r.plugin.zero_stage = staged ? c.zero_stage : -1;
  r.plugin.cpu_offload = (staged || c.plugin == PluginKind::torch_fsdp) && c.cpu_offload;
  r.plugin.pp_schedule = c.pp > 1 ? c.schedule : planner::PipelineSchedule::one_f_one_b;
  r.plugin.num_model_chunks = r.plugin.pp_schedule == planner::PipelineSchedule::interleaved ? c.model_chunks : 1;
  return r;
}

}  // namespace tessera::gui
