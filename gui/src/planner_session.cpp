#include "planner_session.h"

#include <QDir>
#include <QFileInfo>
#include <QTimer>

#include "shown_plan_file.h"
#include "tessera/planner/refit_plan.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::gui {

using planner::EstimateRequest;
using planner::PlanRequest;

namespace {

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

PlannerSession::PlannerSession(QObject* parent) : QObject(parent), fit_timer_(new QTimer(this)) {
  fit_timer_->setSingleShot(true);
  fit_timer_->setInterval(0);
  connect(fit_timer_, &QTimer::timeout, this, &PlannerSession::updateFitLimits);
  connect(&worker_, &PlanSearchWorker::finished, this, &PlannerSession::onSearchFinished);
}

void PlannerSession::setInputs(const PlannerInputs& inputs) {
  // Another model, cluster, GPU kind, plugin filter or runtime asks for another plan; the rest is what-if on the plan in view.
  const bool same_plan_space = model_ && !input_error_ && inputs.model == inputs_.model && inputs.cluster == inputs_.cluster &&
                               inputs.gpu == inputs_.gpu && inputs.gpus_per_node == inputs_.gpus_per_node && inputs.plugin == inputs_.plugin &&
                               inputs.runtime == inputs_.runtime;
  inputs_ = inputs;
  if (!model_ || inputs.model != model_source_) {
    auto model = planner::load_model(inputs.model, "--model");
    if (!model) return reject(InputError{InputField::model, model.error().message});
    model_ = std::make_shared<const planner::Model>(std::move(model).value());
    model_source_ = inputs.model;
  }
  planner::ClusterSpec cluster;
  if (auto error = make_cluster_spec(inputs, cluster, &gpus_)) return reject(*error);
  PlanRequest request;
  if (auto error = make_plan_request(inputs, cluster, request)) return reject(*error);
  if (Status s = planner::validate_plan_request(*model_, request); !s) {
    return reject(InputError{field_of_error(s.error().message, inputs), s.error().message});
  }
  request_ = std::move(request);
  input_error_.reset();
  emit inputsChecked(std::nullopt);
  if (!same_plan_space) take_best_plan_ = true;
  carry_note_.clear();
  if (shown_) {
    // The shown plan under the new inputs, fitting or not; else nothing until the search's best arrives.
    std::optional<ShownPlan> carried;
    if (!take_best_plan_) {
      Result<EstimateRequest> moved = planner::carry_plan(shown_->request, request_);
      if (moved) moved.value().assumptions = request_.assumptions;  // a new memory headroom holds for the plan in view too
      auto evaluated = moved ? evaluate(moved.value()) : Result<ShownPlan>(moved.error());
      if (evaluated) carried = std::move(evaluated).value();
      else carry_note_ = tr("The plan in view cannot follow this change (%1): showing the best plan instead.").arg(QString::fromStdString(evaluated.error().message));
    }
    take_best_plan_ = !carried.has_value();
    show(std::move(carried));
  }
  searched_model_source_ = model_source_;
  worker_.search(model_, request_);
  emit searchStarted();
}

const std::vector<planner::RankMemoryTimeline>& PlannerSession::memoryTimeline() const {
  static const std::vector<planner::RankMemoryTimeline> kNone;
  if (!shown_) return kNone;
  if (!memory_timeline_) {
    planner::StepSimulation step = shown_->simulation;
    step.events = shown_->events();
    memory_timeline_ = planner::memory_timeline(*model_, shown_->request, shown_->memory, step);
  }
  return *memory_timeline_;
}

Status PlannerSession::showLayout(const LayoutChoice& choice) {
  if (!model_ || input_error_ || !shown_) return make_error(ErrorCode::invalid_argument, "no plan to change: fix the inputs or wait for the search");
  auto request = layout_request(choice, shown_->request, request_);
  if (!request) return request.error();
  auto evaluated = evaluate(request.value());
  if (!evaluated) return evaluated.error();
  take_best_plan_ = false;
  show(std::move(evaluated).value());
  return Status::success();
}

void PlannerSession::cancelSearch() {
  if (!worker_.busy()) return;
  worker_.cancel();
  ranking_stale_ = result_ != nullptr;
  emit searchCancelled();
}

void PlannerSession::reject(InputError error) {
  worker_.cancel();  // a search still running for earlier inputs must not fill the table later
  input_error_ = std::move(error);
  take_best_plan_ = true;
  result_.reset();
  result_model_source_.clear();
  ranking_stale_ = false;
  emit inputsChecked(input_error_);
  emit resultsCleared();
  show(std::nullopt);
}

void PlannerSession::selectPlan(const EstimateRequest& plan) {
  if (!model_ || input_error_) return;
  auto evaluated = evaluate(plan);
  if (!evaluated) return;
  take_best_plan_ = false;
  show(std::move(evaluated).value());
}

Status PlannerSession::openMeasuredRun(const QString& path) {
  auto run = planner::read_measured_run(path.toStdString());
  if (!run) return run.error();
  std::string model_source;
  auto model = load_run_model(path, run->model_name, model_source);
  if (!model) return model.error();
  // A CPU run is predicted on the CPU it ran on (its RAM, its speed), not on the GPU the window had.
  const std::string gpu_name = run->device == "cpu" ? run->device : inputs_.gpu;
  auto gpu = gpu_profile(gpu_name);
  if (!gpu) return gpu.error();
  auto predicted = planner::estimate_memory(model.value(), gpu.value(), run->request);
  if (!predicted) return predicted.error();
  const EstimateRequest& r = run->request;
  PlannerInputs in = inputs_;
  in.model = model_source;
  in.cluster.clear();
  in.gpu = gpu_name;
  in.gpus = r.layout.world_size();
  if (run->device == "cpu") in.gpus_per_node = in.gpus;  // the ranks of one machine
  in.global_batch = r.training.micro_batch_size * r.training.num_micro_batches * r.layout.dp;
  in.seq_len = r.training.seq_len;
  in.precision = r.training.precision;
  in.optimizer = r.training.optimizer;
  in.activation_profile = r.training.activation_profile;
  in.torch_compile = r.training.torch_compile;
  in.transformers_version = r.training.transformers_version;
  in.recompute = r.training.recompute;
  in.plugin = r.plugin.kind;
  in.runtime = r.plugin.runtime;
  in.pin_memory = r.plugin.pin_memory;
  auto ranks =
      planner::compare_memory(planner::rank_rows(predicted.value()), "the planner's estimate of its set-up", run->ranks, path.toStdString());
  if (!ranks) return ranks.error();
  MeasuredComparison comparison{path, model_source, run.value(), std::move(ranks).value()};
  measured_.reset();
  logged_.reset();
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

Status PlannerSession::openRunLog(const QString& path) {
  if (!shown_) {
    return make_error(ErrorCode::invalid_argument, path.toStdString() + ": a run's log carries no set-up; show the plan it ran first (search it, or open its session)");
  }
  auto text = planner::read_text_file(path.toStdString(), "run log", planner::kMaxTrainingLogBytes);
  if (!text) return text.error();
  auto log = planner::parse_training_log(text.value(), path.toStdString());
  if (!log) return log.error();
  auto plan = shown_plan_file(*this);
  if (!plan) return plan.error();
  auto comparison = planner::compare_logged_run(plan->file, plan->index, log.value(), path.toStdString());
  if (!comparison) return comparison.error();
  measured_.reset();
  logged_ = LoggedRun{path, shown_, std::move(comparison).value()};
  emit measuredChanged();
  return Status::success();
}

void PlannerSession::closeMeasuredRun() {
  measured_.reset();
  logged_.reset();
  emit measuredChanged();
}

void PlannerSession::onSearchFinished(std::shared_ptr<const planner::PlanSearchResult> result, const QString& error, double seconds) {
  last_search_s_ = seconds;
  if (!result) return reject(InputError{field_of_error(error.toStdString(), inputs_), error.toStdString()});
  result_ = std::move(result);
  result_model_source_ = searched_model_source_;
  ranking_stale_ = false;
  if (!shown_ || take_best_plan_) {
    // The winner, or when nothing fits the closest miss, so that the views show why.
    const std::optional<EstimateRequest> best =
        !result_->plans.empty() ? std::optional<EstimateRequest>(result_->plans.front().request) : result_->closest;
    std::optional<ShownPlan> shown;
    if (best) {
      if (auto evaluated = evaluate(*best)) shown = std::move(evaluated).value();
    }
    show(std::move(shown));
  }
  take_best_plan_ = false;
  emit searchFinished();
}

Result<ShownPlan> PlannerSession::evaluate(const EstimateRequest& plan) const {
  auto memory = planner::estimate_memory(*model_, request_.cluster.gpu, plan);
  if (!memory) return memory.error();
  auto simulation = planner::simulate_step(*model_, request_.cluster, plan, memory.value(), request_.simulation, false);
  if (!simulation) return simulation.error();
  return ShownPlan(model_, request_, plan, std::move(memory).value(), std::move(simulation).value());
}

ShownPlan::ShownPlan(std::shared_ptr<const planner::Model> model, const PlanRequest& search, EstimateRequest plan, planner::MemoryEstimate estimate,
                     planner::StepSimulation step)
    : request(std::move(plan)),
      memory(std::move(estimate)),
      simulation(std::move(step)),
      model_(std::move(model)),
      cluster_(search.cluster),
      settings_(search.simulation) {}

const std::vector<planner::TraceEvent>& ShownPlan::events() const {
  if (!events_) {
    // The same simulation as `simulation`, which succeeded, now with its events.
    auto step = planner::simulate_step(*model_, cluster_, request, memory, settings_, true);
    events_ = step ? std::move(step.value().events) : std::vector<planner::TraceEvent>{};
  }
  return *events_;
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
  shown_ = plan ? std::make_shared<const ShownPlan>(std::move(*plan)) : nullptr;
  memory_timeline_.reset();
  fit_limits_ = FitLimits{};
  if (shown_) fit_timer_->start();  // restarted: a burst of changes computes once
  emit shownPlanChanged();
  if (measured_ && !measuredRunMatchesShownPlan()) {
    measured_.reset();  // the bars would compare the run with another model or layout
    emit measuredChanged();
  }
  if (logged_ && logged_->plan != shown_) {
    logged_.reset();  // the log was read against another plan
    emit measuredChanged();
  }
}

void PlannerSession::updateFitLimits() {
  if (!shown_) return;
  fit_limits_ = fit_limits(*model_, request_, shown_->request);
  emit fitLimitsChanged();
}

}  // namespace tessera::gui
