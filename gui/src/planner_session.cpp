#include "planner_session.h"

#include <algorithm>

#include "tessera/planner/registry.h"

namespace tessera::gui {

using planner::EstimateRequest;
using planner::PlanRequest;

namespace {

// The shown plan under new inputs: the same plugin, layout and micro-batch
// where they still divide; the training settings of the new inputs. The
// assumptions stay the plan's own (a measured run's plan keeps its zeros).
EstimateRequest carry_over(EstimateRequest plan, const PlanRequest& inputs) {
  plan.training.precision = inputs.precision;
  plan.training.optimizer = inputs.optimizer;
  plan.training.activation_profile = inputs.activation_profile;
  plan.training.seq_len = inputs.seq_len;
  if (!inputs.recompute.empty()) plan.training.recompute = inputs.recompute.front();
  const int64_t world = inputs.cluster.world_size();
  if (plan.layout.world_size() != world) {
    const int64_t model_parallel = plan.layout.tp * plan.layout.pp;
    if (world % model_parallel == 0) {
      plan.layout.dp = world / model_parallel;
    } else {
      plan.layout = planner::ParallelLayout{world, 1, 1, false};
    }
    plan.plugin.gemini.chunk_size = 0;  // searched again: shards must divide evenly over the new dp
  }
  const int64_t per_rank = std::max<int64_t>(1, inputs.global_batch_size / plan.layout.dp);
  if (per_rank % plan.training.micro_batch_size != 0) plan.training.micro_batch_size = 1;
  plan.training.num_micro_batches = per_rank / plan.training.micro_batch_size;
  return plan;
}

}  // namespace

PlannerSession::PlannerSession(QObject* parent) : QObject(parent) {
  connect(&worker_, &PlanSearchWorker::finished, this, &PlannerSession::onSearchFinished);
}

void PlannerSession::setInputs(const PlannerInputs& inputs) {
  const bool same_model_and_cluster = inputs.model == inputs_.model && inputs.cluster == inputs_.cluster && inputs.gpu == inputs_.gpu &&
                                      inputs.gpus == inputs_.gpus && inputs.gpus_per_node == inputs_.gpus_per_node && model_;
  inputs_ = inputs;
  if (!model_ || inputs.model != model_source_) {
    auto model = planner::load_model(inputs.model, "--model");
    if (!model) {
      emit inputsChecked(InputError{InputField::model, model.error().message});
      return;
    }
    model_ = std::make_shared<const planner::Model>(std::move(model).value());
    model_source_ = inputs.model;
  }
  planner::ClusterSpec cluster;
  if (auto error = make_cluster_spec(inputs, cluster)) {
    emit inputsChecked(error);
    return;
  }
  PlanRequest request = make_plan_request(inputs, cluster);
  if (Status s = planner::validate_plan_request(*model_, request); !s) {
    emit inputsChecked(InputError{field_of_error(s.error().message), s.error().message});
    return;
  }
  request_ = std::move(request);
  emit inputsChecked(std::nullopt);
  if (!same_model_and_cluster) take_best_plan_ = true;
  if (shown_ && !take_best_plan_) {
    auto carried = evaluate(carry_over(shown_->request, request_));
    show(carried ? std::optional<ShownPlan>(std::move(carried).value()) : std::nullopt);
  }
  worker_.search(model_, request_);
  emit searchStarted();
}

void PlannerSession::selectPlan(const EstimateRequest& plan) {
  if (!model_) return;
  auto evaluated = evaluate(plan);
  if (!evaluated) return;
  take_best_plan_ = false;
  show(std::move(evaluated).value());
}

Status PlannerSession::openMeasuredRun(const QString& path) {
  auto run = planner::read_measured_run(path.toStdString());
  if (!run) return run.error();
  auto model = planner::load_model(run->model_name, "metrics model");
  if (!model) return model.error();
  auto gpu = planner::load_gpu(inputs_.gpu, "--gpu");
  if (!gpu) return gpu.error();
  auto predicted = planner::estimate_memory(model.value(), gpu.value(), run->request);
  if (!predicted) return predicted.error();
  const EstimateRequest& r = run->request;
  PlannerInputs in = inputs_;
  in.model = run->model_name;
  in.cluster.clear();
  in.gpus = r.layout.world_size();
  in.global_batch = r.training.micro_batch_size * r.training.num_micro_batches * r.layout.dp;
  in.seq_len = r.training.seq_len;
  in.precision = r.training.precision;
  in.optimizer = r.training.optimizer;
  in.recompute = r.training.recompute;
  in.plugin = r.plugin.kind;
  MeasuredComparison comparison{path, run.value(), predicted->ranks.front().bytes, {}};
  comparison.errors = planner::compare_memory(comparison.predicted, run->memory);
  measured_ = std::move(comparison);
  setInputs(in);
  selectPlan(r);
  emit measuredChanged();
  return Status::success();
}

void PlannerSession::closeMeasuredRun() {
  measured_.reset();
  emit measuredChanged();
}

void PlannerSession::onSearchFinished(std::shared_ptr<const planner::PlanSearchResult> result, const QString& error, double seconds) {
  last_search_s_ = seconds;
  if (!result) {
    emit inputsChecked(InputError{field_of_error(error.toStdString()), error.toStdString()});
    return;
  }
  result_ = std::move(result);
  if (take_best_plan_ || !shown_) {
    // The winner, or when nothing fits the closest miss, so that the views show why.
    const std::optional<EstimateRequest> best =
        !result_->plans.empty() ? std::optional<EstimateRequest>(result_->plans.front().request) : result_->closest;
    if (best) {
      auto evaluated = evaluate(*best);
      if (evaluated) show(std::move(evaluated).value());
    }
    take_best_plan_ = false;
  }
  emit searchFinished();
}

Result<ShownPlan> PlannerSession::evaluate(const EstimateRequest& plan) const {
  auto memory = planner::estimate_memory(*model_, request_.cluster.gpu, plan);
  if (!memory) return memory.error();
  auto simulation = planner::simulate_step(*model_, request_.cluster, plan, memory.value(), request_.simulation, true);
  if (!simulation) return simulation.error();
  return ShownPlan{plan, std::move(memory).value(), std::move(simulation).value()};
}

void PlannerSession::show(std::optional<ShownPlan> plan) {
  shown_ = std::move(plan);
  emit shownPlanChanged();
}

}  // namespace tessera::gui
