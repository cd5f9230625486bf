// The "Measured run" view: a run opened from metrics.json against the
// prediction of its set-up: step time and tokens/s measured, predicted and the
// prediction's error (measured_figures.h), and the run's loss and gradient-norm
// curves step by step; its memory is set against the prediction in the Memory
// view. Or a Megatron-LM, DeepSpeed or torchtitan run's log against the plan in
// view: the same two figures, and each reported rank's peak memory as PyTorch
// counts it beside the plan's, as `tessera compare PLAN LOG` prints them.
#pragma once

#include <optional>

#include <QWidget>

#include "planner_session.h"

class QLabel;
class QTableWidget;

namespace tessera::gui {

class SeriesChart;

class MeasuredRunView : public QWidget {
  Q_OBJECT

 public:
  explicit MeasuredRunView(QWidget* parent = nullptr);

  // The run and the simulated step of its set-up; none: the view says how to open one.
  void setRun(const std::optional<MeasuredComparison>& run, const std::shared_ptr<const ShownPlan>& predicted);
  void setLoggedRun(const LoggedRun& log);

  // The figures as shown ("measured 10.8 ms · predicted 2.3 ms · −78.6%"), for tests.
  QString stepTimeText() const;
  QString tokensText() const;
  SeriesChart* lossChart() const { return loss_; }
  SeriesChart* gradNormChart() const { return grad_norm_; }
  QTableWidget* rankTable() const { return ranks_; }  // a log's ranks; hidden for a metrics.json run

 private:
  QLabel* title_ = nullptr;
  QLabel* step_time_ = nullptr;
  QLabel* tokens_ = nullptr;
  QLabel* note_ = nullptr;
  SeriesChart* loss_ = nullptr;
  SeriesChart* grad_norm_ = nullptr;
  QWidget* curves_ = nullptr;  // the loss and gradient-norm charts of a metrics.json run
  QTableWidget* ranks_ = nullptr;
};

}  // namespace tessera::gui
