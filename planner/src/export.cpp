#include "tessera/planner/export.h"

#include "export_internal.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"

namespace tessera::planner {
namespace export_detail {

Status check_plan(const PlanFile& file, size_t index) {
  if (file.plans.empty()) {
    return make_error(ErrorCode::invalid_argument, "--plan: the plan file holds no plans (nothing fit); run `tessera plan` with more GPUs");
  }
  if (index >= file.plans.size()) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(index + 1) + " is out of range: the plan file holds plans 1 to " +
                                                       std::to_string(file.plans.size()));
  }
  // A plan file edited by hand may hold settings the libraries would reject: check them as `tessera estimate` would.
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  if (Status s = validate_request(model.value(), file.cluster.gpu, file.plans[index]); !s) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(index + 1) + ": " + s.error().message);
  }
  return Status::success();
}

const nlohmann::json& plan_json(const PlanFile& file, size_t index) {
  static const nlohmann::json empty = nlohmann::json::object();
  const auto plans = file.document.find("plans");
  if (plans == file.document.end() || !plans->is_array() || index >= plans->size() || !(*plans)[index].is_object()) return empty;
  return (*plans)[index];
}

int64_t gradient_accumulation_steps(const EstimateRequest& request) {
  return request.layout.pp > 1 ? 1 : request.training.num_micro_batches;
}

int64_t sequences_per_step(const EstimateRequest& request) {
  return request.training.micro_batch_size * request.training.num_micro_batches * request.layout.dp;
}

Error cannot_express(const char* target, const std::string& why) {
  return make_error(ErrorCode::unsupported, std::string("--to ") + target + ": " + why);
}

}  // namespace export_detail

Result<std::string> export_plan(const PlanFile& file, size_t plan_index, ExportTarget target) {
  switch (target) {
    case ExportTarget::colossalai: return export_colossalai(file, plan_index);
    case ExportTarget::deepspeed: return export_deepspeed(file, plan_index);
    case ExportTarget::perfetto: return export_perfetto(file, plan_index);
  }
  return make_error(ErrorCode::invalid_argument, "--to: unknown target");
}

}  // namespace tessera::planner
