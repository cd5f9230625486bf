// The app's state and its one connection to the planner: the inputs, the
// model, the ranked plans of the last search, the plan the views show (its
// memory and simulated step), and a measured run to compare with. Widgets read
// it and draw; they compute nothing themselves.
//
// A change of inputs re-estimates the shown plan at once (microseconds) and
// starts a search off the UI thread; the plan carries over to the new inputs
// (same plugin and layout) unless the model or the cluster changed, in which
// case the search's best plan replaces it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QObject>
#include <QString>

#include "plan_search_worker.h"
#include "planner_inputs.h"
#include "tessera/planner/measured_run.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/search.h"
#include "tessera/planner/simulate.h"

namespace tessera::gui {

struct ShownPlan {
  planner::EstimateRequest request;
  planner::MemoryEstimate memory;
  planner::StepSimulation simulation;  // with its events, for the pipeline view
};

struct MeasuredComparison {
  QString path;
  planner::MeasuredRun run;
  MemoryBreakdown predicted;           // the planner's first rank row for the run's own set-up
  std::vector<planner::CategoryError> errors;   // predicted against measured, per category
};

class PlannerSession : public QObject {
  Q_OBJECT

 public:
  explicit PlannerSession(QObject* parent = nullptr);

  void setInputs(const PlannerInputs& inputs);
  const PlannerInputs& inputs() const { return inputs_; }
  // Shows `plan` (a row of the plan table) until the user picks another.
  void selectPlan(const planner::EstimateRequest& plan);
  // Reads a metrics.json, sets the inputs to the run's set-up and shows its plan with the measured bars.
  Status openMeasuredRun(const QString& path);
  void closeMeasuredRun();

  bool hasModel() const { return model_ != nullptr; }
  const planner::Model& model() const { return *model_; }
  const std::shared_ptr<const planner::Model>& sharedModel() const { return model_; }
  const planner::PlanRequest& planRequest() const { return request_; }
  const std::optional<ShownPlan>& shownPlan() const { return shown_; }
  const std::shared_ptr<const planner::PlanSearchResult>& searchResult() const { return result_; }
  const std::optional<MeasuredComparison>& measured() const { return measured_; }
  bool searching() const { return worker_.busy(); }
  double lastSearchSeconds() const { return last_search_s_; }

 signals:
  // After every setInputs: the first invalid input, or none.
  void inputsChecked(std::optional<InputError> error);
  void shownPlanChanged();
  void searchStarted();
  void searchFinished();
  void measuredChanged();

 private:
  void onSearchFinished(std::shared_ptr<const planner::PlanSearchResult> result, const QString& error, double seconds);
  Result<ShownPlan> evaluate(const planner::EstimateRequest& plan) const;
  void show(std::optional<ShownPlan> plan);

  PlannerInputs inputs_;
  std::string model_source_;
  std::shared_ptr<const planner::Model> model_;
  planner::PlanRequest request_;
  std::shared_ptr<const planner::PlanSearchResult> result_;
  std::optional<ShownPlan> shown_;
  bool take_best_plan_ = true;  // the next search's winner replaces the shown plan
  std::optional<MeasuredComparison> measured_;
  double last_search_s_ = 0;
  PlanSearchWorker worker_;
};

}  // namespace tessera::gui
