#include "planner_session.h"

#include <QDir>
#include <QFileInfo>

#include "tessera/planner/refit_plan.h"
#include "tessera/planner/registry.h"

namespace tessera::gui {

using planner::EstimateRequest;
using planner::PlanRequest;

namespace {

// Whether `plan` is one of the rows the search returned (a plan that fits, or a rejection's closest candidate).
bool among_results(const planner::PlanSearchResult& result, const EstimateRequest& plan) {
  const std::string description = planner::describe_plan(plan);
  for (const planner::Candidate& c : result.plans) {
    if (planner::describe_plan(c.request) == description) return true;
  }
  for (const auto& [reason, rejection] : result.rejected) {
    if (rejection.closest_request && planner::describe_plan(*rejection.closest_request) == description) return true;
  }
  return false;
}

// The model a measured run was trained on: its shipped name, else the config.json
// `tessera train` wrote next to metrics.json. Sets `source` to what load_model read.
Result<planner::Model> load_run_model(const QString& metrics_path, const std::string& name, std::string& source) {
  auto model = planner::load_model(name, "metrics model");
  if (model) {
    source = name;
    return model;
  }
  const QString config = QFileInfo(metrics_path).dir().filePath(QStringLiteral("config.json"));
  if (!QFileInfo::exists(config)) {
    return make_error(model.error().code, model.error().message + "; and there is no config.json next to " + metrics_path.toStdString());
  }
  source = config.toStdString();
  return planner::load_model(source, "metrics model");
}

}  // namespace

PlannerSession::PlannerSession(QObject* parent) : QObject(parent) {
  connect(&worker_, &PlanSearchWorker::finished, this, &PlannerSession::onSearchFinished);
}

void PlannerSession::setInputs(const PlannerInputs& inputs) {
  const bool same_search_space = model_ && !input_error_ && inputs.model == inputs_.model && inputs.cluster == inputs_.cluster &&
                                 inputs.gpu == inputs_.gpu && inputs.gpus == inputs_.gpus && inputs.gpus_per_node == inputs_.gpus_per_node &&
                                 inputs.plugin == inputs_.plugin && inputs.global_batch == inputs_.global_batch;
  inputs_ = inputs;
  if (!model_ || inputs.model != model_source_) {
    auto model = planner::load_model(inputs.model, "--model");
    if (!model) return reject(InputError{InputField::model, model.error().message});
    model_ = std::make_shared<const planner::Model>(std::move(model).value());
    model_source_ = inputs.model;
  }
  planner::ClusterSpec cluster;
  if (auto error = make_cluster_spec(inputs, cluster)) return reject(*error);
  PlanRequest request = make_plan_request(inputs, cluster);
  if (Status s = planner::validate_plan_request(*model_, request); !s) {
    return reject(InputError{field_of_error(s.error().message, inputs), s.error().message});
  }
  request_ = std::move(request);
  input_error_.reset();
  emit inputsChecked(std::nullopt);
  if (!same_search_space) take_best_plan_ = true;
  if (shown_) {
    // The shown plan under the new inputs, where the search could still return it; else nothing until the search ends.
    std::optional<ShownPlan> carried;
    if (!take_best_plan_) {
      if (const auto refit = planner::refit_plan(shown_->request, request_)) {
        if (auto evaluated = evaluate(*refit)) carried = std::move(evaluated).value();
      }
    }
    take_best_plan_ = !carried.has_value();
    carried_ = carried.has_value();
    show(std::move(carried));
  }
  searched_model_source_ = model_source_;
  worker_.search(model_, request_);
  emit searchStarted();
}

void PlannerSession::reject(InputError error) {
  worker_.cancel();  // a search still running for earlier inputs must not fill the table later
  input_error_ = std::move(error);
  take_best_plan_ = true;
  result_.reset();
  result_model_source_.clear();
  emit inputsChecked(input_error_);
  emit resultsCleared();
  show(std::nullopt);
}

void PlannerSession::selectPlan(const EstimateRequest& plan) {
  if (!model_ || input_error_) return;
  auto evaluated = evaluate(plan);
  if (!evaluated) return;
  take_best_plan_ = false;
  carried_ = false;
  show(std::move(evaluated).value());
}

Status PlannerSession::openMeasuredRun(const QString& path) {
  auto run = planner::read_measured_run(path.toStdString());
  if (!run) return run.error();
  std::string model_source;
  auto model = load_run_model(path, run->model_name, model_source);
  if (!model) return model.error();
  auto gpu = planner::load_gpu(inputs_.gpu, "--gpu");
  if (!gpu) return gpu.error();
  auto predicted = planner::estimate_memory(model.value(), gpu.value(), run->request);
  if (!predicted) return predicted.error();
  const EstimateRequest& r = run->request;
  PlannerInputs in = inputs_;
  in.model = model_source;
  in.cluster.clear();
  in.gpus = r.layout.world_size();
  in.global_batch = r.training.micro_batch_size * r.training.num_micro_batches * r.layout.dp;
  in.seq_len = r.training.seq_len;
  in.precision = r.training.precision;
  in.optimizer = r.training.optimizer;
  in.recompute = r.training.recompute;
  in.plugin = r.plugin.kind;
  auto ranks =
      planner::compare_memory(planner::rank_rows(predicted.value()), "the planner's estimate of its set-up", run->ranks, path.toStdString());
  if (!ranks) return ranks.error();
  MeasuredComparison comparison{path, model_source, run.value(), std::move(ranks).value()};
  measured_.reset();
  setInputs(in);
  if (input_error_) {
    emit measuredChanged();
    return make_error(ErrorCode::invalid_argument, path.toStdString() + ": the run's set-up is not valid here: " + input_error_->message);
  }
  selectPlan(r);
  measured_ = std::move(comparison);
  emit measuredChanged();
  return Status::success();
}

void PlannerSession::closeMeasuredRun() {
  measured_.reset();
  emit measuredChanged();
}

void PlannerSession::onSearchFinished(std::shared_ptr<const planner::PlanSearchResult> result, const QString& error, double seconds) {
  last_search_s_ = seconds;
  if (!result) return reject(InputError{field_of_error(error.toStdString(), inputs_), error.toStdString()});
  result_ = std::move(result);
  result_model_source_ = searched_model_source_;
  const bool keep_shown = shown_ && !take_best_plan_ && (!carried_ || among_results(*result_, shown_->request));
  if (!keep_shown) {
    // The winner, or when nothing fits the closest miss, so that the views show why.
    const std::optional<EstimateRequest> best =
        !result_->plans.empty() ? std::optional<EstimateRequest>(result_->plans.front().request) : result_->closest;
    std::optional<ShownPlan> shown;
    if (best) {
      if (auto evaluated = evaluate(*best)) shown = std::move(evaluated).value();
    }
    carried_ = false;
    show(std::move(shown));
  }
  take_best_plan_ = false;
  emit searchFinished();
}

Result<ShownPlan> PlannerSession::evaluate(const EstimateRequest& plan) const {
  auto memory = planner::estimate_memory(*model_, request_.cluster.gpu, plan);
  if (!memory) return memory.error();
  auto simulation = planner::simulate_step(*model_, request_.cluster, plan, memory.value(), request_.simulation, true);
  if (!simulation) return simulation.error();
  return ShownPlan{plan, std::move(memory).value(), std::move(simulation).value()};
}

bool PlannerSession::measuredRunMatchesShownPlan() const {
  if (!shown_) return true;  // nothing to compare against yet (an invalid input on the way); the run stays
  const EstimateRequest& run = measured_->run.request;
  const EstimateRequest& plan = shown_->request;
  return measured_->model_source == model_source_ && planner::describe_plan(run) == planner::describe_plan(plan) &&
         run.training.seq_len == plan.training.seq_len && run.training.precision == plan.training.precision &&
         run.training.optimizer == plan.training.optimizer;
}

void PlannerSession::show(std::optional<ShownPlan> plan) {
  shown_ = std::move(plan);
  emit shownPlanChanged();
  if (measured_ && !measuredRunMatchesShownPlan()) {
    measured_.reset();  // the bars would compare the run with another model or layout
    emit measuredChanged();
  }
}

}  // namespace tessera::gui
