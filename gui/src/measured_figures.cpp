#include "measured_figures.h"

#include <algorithm>

namespace tessera::gui {

std::optional<double> median_step_time(const std::vector<double>& step_times_s) {
  if (step_times_s.empty()) return std::nullopt;
  std::vector<double> steps(step_times_s.size() > 1 ? step_times_s.begin() + 1 : step_times_s.begin(), step_times_s.end());
  std::sort(steps.begin(), steps.end());
  const size_t half = steps.size() / 2;
  return steps.size() % 2 == 1 ? steps[half] : (steps[half - 1] + steps[half]) / 2;
}

MeasuredSpeed measured_speed(const planner::MeasuredRun& run, const planner::StepSimulation& predicted) {
  MeasuredSpeed speed;
  if (const auto step = median_step_time(run.step_time_s)) speed.step_time_s = MeasuredFigure{*step, predicted.step_time_s};
  if (run.tokens_per_s > 0) speed.tokens_per_s = MeasuredFigure{run.tokens_per_s, predicted.tokens_per_s};
  return speed;
}

}  // namespace tessera::gui
