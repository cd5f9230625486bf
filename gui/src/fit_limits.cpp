#include "fit_limits.h"

#include <functional>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/refit_plan.h"

namespace tessera::gui {

namespace {

// Whether `plan` carried to `request` fits; false where the request is invalid (a sequence
// beyond the model's positions) or the plan cannot be carried or estimated.
bool carried_plan_fits(const planner::Model& model, const planner::PlanRequest& request, const planner::EstimateRequest& plan) {
  if (!planner::validate_plan_request(model, request)) return false;
  const auto carried = planner::carry_plan(plan, request);
  if (!carried) return false;
  const auto memory = planner::estimate_memory(model, request.cluster.gpu, carried.value());
  return memory && memory->fits();
}

// The largest 2^e in `range` with fits(e), given that fits holds from the first
// carried exponent up to some limit and not beyond; 0 when none.
int64_t largest_fitting(PowerOfTwoRange range, const std::function<bool(int)>& carries, const std::function<bool(int)>& fits) {
  int low = range.low;
  while (low <= range.high && !carries(low)) ++low;  // cheap: no estimate
  if (low > range.high || !fits(low)) return 0;
  int high = range.high;
  while (low < high) {  // fits(low) holds
    const int mid = (low + high + 1) / 2;
    if (fits(mid)) low = mid;
    else high = mid - 1;
  }
  return int64_t{1} << low;
}

}  // namespace

FitLimits fit_limits(const planner::Model& model, const planner::PlanRequest& request, const planner::EstimateRequest& plan) {
  const auto with_seq = [&](int e) {
    planner::PlanRequest r = request;
    r.seq_len = int64_t{1} << e;
    return r;
  };
  const auto with_batch = [&](int e) {
    planner::PlanRequest r = request;
    r.global_batch_size = int64_t{1} << e;
    return r;
  };
  FitLimits limits;
  limits.seq_len = largest_fitting(
      kSeqSliderRange, [](int) { return true; }, [&](int e) { return carried_plan_fits(model, with_seq(e), plan); });
  limits.global_batch = largest_fitting(
      kBatchSliderRange, [&](int e) { return planner::carry_plan(plan, with_batch(e)).ok(); },
      [&](int e) { return carried_plan_fits(model, with_batch(e), plan); });
  return limits;
}

}  // namespace tessera::gui
