#include "train_plan.h"

#include "commands.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/export.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/report.h"

namespace tessera::cli {

using planner::ActivationProfile;

ActivationProfile engine_activation_profile(bool on_gpu) { return on_gpu ? ActivationProfile::tessera_gpu : ActivationProfile::tessera; }

Result<TrainedPlan> apply_plan(const std::string& path, int64_t number, EstimateOptions& e, bool on_gpu) {
  auto plan = planner::read_plan_file(path);
  if (!plan) return plan.error();
  if (plan->plans.empty()) return make_error(ErrorCode::invalid_argument, "--plan: " + path + " holds no plan that fits");
  const auto plans = static_cast<int64_t>(plan->plans.size());
  if (number < 1 || number > plans) {
    return make_error(ErrorCode::invalid_argument, "--plan-number " + std::to_string(number) + ": " + path + " holds plans 1 to " + std::to_string(plans));
  }
  const planner::EstimateRequest& r = plan->plans[static_cast<size_t>(number - 1)];
  e.model = plan->model_source;
  e.request.training = r.training;
  e.precision = std::string(enum_name(r.training.precision));
  e.optimizer = std::string(enum_name(r.training.optimizer));
  e.recompute = std::string(enum_name(r.training.recompute));
  e.activation_profile = std::string(enum_name(engine_activation_profile(on_gpu)));
  return TrainedPlan{r, r.training.activation_profile, plan->cluster.gpu.name, plan->cluster.gpu.memory_bytes};
}

Error plan_setting_refused(const std::string& path, const Error& refusal) {
  return make_error(refusal.code, "--plan " + path + ": " + refusal.message + " (a setting of the plan: make it again with tessera plan)");
}

std::string other_gpu_warning(const TrainedPlan& plan, const std::string& path, const planner::GpuProfile& gpu) {
  if (gpu.name == plan.gpu) return "";
  const std::string line = "--plan " + path + " was made for " + plan.gpu + " and trains on " + gpu.name + ": the run's plan.json estimates it on " + gpu.name;
  if (gpu.memory_bytes > plan.gpu_memory_bytes) return line + " (--device-memory " + std::to_string(plan.gpu_memory_bytes >> 20) + " holds it to " + plan.gpu + "'s memory)";
  return line + ", whose " + planner::format_bytes(gpu.memory_bytes) + " may not hold what the plan sized for " + planner::format_bytes(plan.gpu_memory_bytes);
}

std::string plan_files_note(const TrainedPlan& plan, bool on_gpu) {
  const ActivationProfile engine = engine_activation_profile(on_gpu);
  std::string note = " (predicted_trace.json beside it; plan.json is the plan with the engine's " + std::string(enum_name(engine)) + " activations";
  if (plan.profile != engine) note += " in place of its " + std::string(enum_name(plan.profile)) + " ones";
  return note + ")";
}

Status write_predicted_trace(const std::string& plan_path, int64_t number, const std::string& path) {
  auto plan = planner::read_plan_file(plan_path);
  if (!plan) return plan.error();
  auto trace = planner::export_perfetto(plan.value(), static_cast<size_t>(number - 1));
  if (!trace) return trace.error();
  return write_file_atomically(path, trace.value(), "--out");
}

}  // namespace tessera::cli
