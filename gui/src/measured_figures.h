// A measured run's speed against the prediction of its set-up: the step time
// (the median step, leaving out the first, which warms up) and tokens/s, each
// measured, predicted and the error of the prediction, as `tessera compare`
// states memory errors: (predicted - measured) / measured.
#pragma once

#include <optional>
#include <vector>

#include "tessera/planner/measured_run.h"
#include "tessera/planner/simulate.h"

namespace tessera::gui {

struct MeasuredFigure {
  double measured = 0;
  double predicted = 0;
  double error_pct() const { return measured > 0 ? 100 * (predicted - measured) / measured : 0; }
};

struct MeasuredSpeed {
  std::optional<MeasuredFigure> step_time_s;  // none when the run recorded no step times
  std::optional<MeasuredFigure> tokens_per_s;  // none when it recorded no throughput
};

// The median of `step_times_s` without the first step (all of them for a run of one step); none when empty.
std::optional<double> median_step_time(const std::vector<double>& step_times_s);

MeasuredSpeed measured_speed(const planner::MeasuredRun& run, const planner::StepSimulation& predicted);

}  // namespace tessera::gui
