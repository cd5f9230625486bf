#include "fit_limits.h"

#include <functional>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/refit_plan.h"

namespace tessera::gui {

namespace {

enum class Fit { invalid, fits, over };

// `plan` carried to `request`: invalid where the request is (a sequence beyond the
// model's positions) or where the plan's shape cannot take it (fewer sequences
// than data-parallel ranks, fewer micro-batches than its schedule needs).
Fit carried_plan_fit(const planner::Model& model, const planner::PlanRequest& request, const planner::EstimateRequest& plan) {
  if (!planner::validate_plan_request(model, request)) return Fit::invalid;
  const auto carried = planner::carry_plan(plan, request);
  if (!carried) return Fit::invalid;
  const auto memory = planner::estimate_memory(model, request.cluster.gpu, carried.value());
  if (!memory) return Fit::invalid;
  return memory->fits() ? Fit::fits : Fit::over;
}

struct Largest {
  int64_t value = 0;              // 0 when none fits
  bool bounded_by_memory = false;  // the next power of two is over memory
};

// The largest 2^e in `range` that fits, given that values the plan can take fit
// from the least of them up to some limit and not beyond.
Largest largest_fitting(PowerOfTwoRange range, const std::function<Fit(int)>& fit) {
  int low = range.low;
  for (;; ++low) {  // the least value the plan can take; at most a few invalid ones below it
    if (low > range.high) return {};
    const Fit f = fit(low);
    if (f == Fit::over) return {0, true};
    if (f == Fit::fits) break;
  }
  int high = range.high;
  while (low < high) {  // fit(low) holds
    const int mid = (low + high + 1) / 2;
    if (fit(mid) == Fit::fits) low = mid;
    else high = mid - 1;
  }
  return {int64_t{1} << low, low < range.high && fit(low + 1) == Fit::over};
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
  const Largest seq = largest_fitting(kSeqSliderRange, [&](int e) { return carried_plan_fit(model, with_seq(e), plan); });
  const Largest batch = largest_fitting(kBatchSliderRange, [&](int e) { return carried_plan_fit(model, with_batch(e), plan); });
  limits.seq_len = seq.value;
  limits.seq_len_bounded_by_memory = seq.bounded_by_memory;
  limits.global_batch = batch.value;
  limits.global_batch_bounded_by_memory = batch.bounded_by_memory;
  return limits;
}

}  // namespace tessera::gui
