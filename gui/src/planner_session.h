// The app's state and its one connection to the planner: the inputs, the
// model, the ranked plans of the last search, the plan the views show (its
// memory and simulated step), and a measured run to compare with. Widgets read
// it and draw; they compute nothing themselves.
//
// A change of inputs re-estimates the shown plan at once (microseconds, through
// planner::carry_plan: same plugin, tp, pp and ZeRO stage; dp and micro-batches
// follow the GPU count and global batch) and starts a search off the UI thread.
// What-if changes (sequence, batch, GPU count, precision, ...) keep the plan in
// view even where it no longer fits: the views show it over capacity. The
// search's best plan replaces it only when the model, the cluster or GPU kind
// or the plugin filter changed, or when the plan cannot be carried (tp × pp
// does not divide the new GPU count; carryNote() says so). Invalid inputs drop
// the running search, the ranked plans and the shown plan, so nothing stale is
// shown or exported.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QObject>
#include <QString>

class QTimer;

#include "fit_limits.h"
#include "layout_choice.h"
#include "plan_search_worker.h"
#include "planner_inputs.h"
#include "tessera/planner/measured_run.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/memory_timeline.h"
#include "tessera/planner/model.h"
#include "tessera/planner/search.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/training_log.h"

namespace tessera::gui {

class ShownPlan {
 public:
  ShownPlan(std::shared_ptr<const planner::Model> model, const planner::PlanRequest& search, planner::EstimateRequest plan,
            planner::MemoryEstimate estimate, planner::StepSimulation step);

  planner::EstimateRequest request;
  planner::MemoryEstimate memory;
  planner::StepSimulation simulation;  // without its events: events() has them
  // The step's trace events (the pipeline view, the memory over a step), simulated
  // when first asked for: thousands of them would cost every control change.
  const std::vector<planner::TraceEvent>& events() const;

 private:
  std::shared_ptr<const planner::Model> model_;
  planner::ClusterSpec cluster_;
  planner::SimulationSettings settings_;
  mutable std::optional<std::vector<planner::TraceEvent>> events_;  // a shown plan never changes, so neither do they
};

struct MeasuredComparison {
  QString path;
  std::string model_source;            // the shipped name or config.json its model was read from
  planner::MeasuredRun run;
  std::vector<planner::RankComparison> ranks;  // each measured rank against the planner's row for it, per category
};

// A Megatron-LM, DeepSpeed or torchtitan run's own log against the plan in view,
// as `tessera compare PLAN LOG` sets it (training_log.h): the log carries no
// set-up, so it is read against the plan shown when it is opened, and closed
// as soon as another is shown (any change of the inputs shows another).
struct LoggedRun {
  QString path;
  std::shared_ptr<const ShownPlan> plan;  // the plan it was read against
  planner::LoggedRunComparison comparison;
};

class PlannerSession : public QObject {
  Q_OBJECT

 public:
  explicit PlannerSession(QObject* parent = nullptr);

  void setInputs(const PlannerInputs& inputs);
  const PlannerInputs& inputs() const { return inputs_; }
  // The first invalid input of the last setInputs (or the last search's failure); none while the inputs are valid.
  const std::optional<InputError>& inputError() const { return input_error_; }
  // Shows `plan` (a row of the plan table) until the user picks another.
  void selectPlan(const planner::EstimateRequest& plan);
  // Shows exactly the layout `choice` applied to the plan in view, fitting or not, as
  // `tessera estimate` evaluates one; an error says why it cannot be evaluated.
  Status showLayout(const LayoutChoice& choice);
  // Reads a metrics.json, sets the inputs to the run's set-up and shows its plan with the measured bars.
  // A run whose model is not a shipped one is read with the config.json `tessera train` writes beside it.
  Status openMeasuredRun(const QString& path);
  // Reads a run's log against the plan in view (which needs one); closes a metrics.json run.
  Status openRunLog(const QString& path);
  // Closes either.
  void closeMeasuredRun();

  bool hasModel() const { return model_ != nullptr; }
  const planner::Model& model() const { return *model_; }
  const std::shared_ptr<const planner::Model>& sharedModel() const { return model_; }
  const planner::PlanRequest& planRequest() const { return request_; }
  // Shared, never changed once shown: the views keep it instead of copying its thousands of trace events.
  const std::shared_ptr<const ShownPlan>& shownPlan() const { return shown_; }
  // The shown plan's device memory over its step, one timeline per rank row; computed
  // when first asked for (a fraction of a millisecond kept off every control change).
  const std::vector<planner::RankMemoryTimeline>& memoryTimeline() const;
  // The largest sequence and global batch at which the shown plan fits (what the sliders mark);
  // computed just after the views have the plan, and announced by fitLimitsChanged.
  const FitLimits& fitLimits() const { return fit_limits_; }
  // Why the last input change could not keep the plan in view (it was replaced by the search's best); empty otherwise.
  const QString& carryNote() const { return carry_note_; }
  const std::shared_ptr<const planner::PlanSearchResult>& searchResult() const { return result_; }
  // The model (shipped name or config.json path) the search result was computed for.
  const std::string& resultModelSource() const { return result_model_source_; }
  const std::optional<MeasuredComparison>& measured() const { return measured_; }
  const std::optional<LoggedRun>& loggedRun() const { return logged_; }
  bool searching() const { return worker_.busy(); }
  // Candidates done and enumerated by the running (or last) search.
  std::pair<int64_t, int64_t> searchProgress() const { return worker_.progress(); }
  // Stops the running search. The ranked plans stay those of the last search that
  // finished, for earlier inputs: rankingIsStale() says so until a search finishes.
  void cancelSearch();
  bool rankingIsStale() const { return ranking_stale_; }
  double lastSearchSeconds() const { return last_search_s_; }

 signals:
  // After every setInputs: the first invalid input, or none.
  void inputsChecked(std::optional<InputError> error);
  void shownPlanChanged();
  void fitLimitsChanged();
  void searchStarted();
  void searchFinished();
  void searchCancelled();
  // The ranked plans were dropped (invalid inputs): searchResult() is null.
  void resultsCleared();
  void measuredChanged();

 private:
  void onSearchFinished(std::shared_ptr<const planner::PlanSearchResult> result, const QString& error, double seconds);
  Result<ShownPlan> evaluate(const planner::EstimateRequest& plan) const;
  void show(std::optional<ShownPlan> plan);
  void reject(InputError error);
  bool measuredRunMatchesShownPlan() const;
  void updateFitLimits();

  PlannerInputs inputs_;
  std::string model_source_;
  std::shared_ptr<const planner::Model> model_;
  GpuProfileCache gpus_;
  planner::PlanRequest request_;
  std::optional<InputError> input_error_;
  std::string searched_model_source_;  // the model of the search in flight
  std::shared_ptr<const planner::PlanSearchResult> result_;
  std::string result_model_source_;
  std::shared_ptr<const ShownPlan> shown_;
  mutable std::optional<std::vector<planner::RankMemoryTimeline>> memory_timeline_;  // of shown_, once asked for
  bool take_best_plan_ = true;  // the next search's winner replaces the shown plan
  FitLimits fit_limits_;
  QTimer* fit_timer_ = nullptr;  // fit limits a moment after the plan: a dozen estimates kept off the views' latency
  QString carry_note_;
  std::optional<MeasuredComparison> measured_;
  std::optional<LoggedRun> logged_;
  double last_search_s_ = 0;
  bool ranking_stale_ = false;
  PlanSearchWorker worker_;
};

}  // namespace tessera::gui
