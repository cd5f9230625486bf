// Helpers shared by the GUI tests: waiting for the background search, and the
// planner's own numbers for the inputs a test sets, to compare the views with.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTest>

#include "input_panel.h"
#include "main_window.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/search.h"

namespace tessera::gui::test {

// Processes events until the session's search has delivered (10 s at most), and what follows it.
inline bool wait_for_search(PlannerSession& session) {
  QElapsedTimer timer;
  timer.start();
  QCoreApplication::processEvents();
  while (session.searching() && timer.elapsed() < 10000) QTest::qWait(2);
  QCoreApplication::processEvents();  // what follows the delivery: the fit limits of the plan it shows
  return !session.searching();
}

// Puts `inputs` into the controls and the session, as a user's edit does.
inline void set_inputs(MainWindow& window, const PlannerInputs& inputs) {
  window.inputPanel()->setInputs(inputs);
  window.session().setInputs(inputs);
}

// Llama-2-70B on 1024 GPUs, global batch 1024: the largest case the latency targets name.
inline PlannerInputs large_example() {
  PlannerInputs inputs;
  inputs.model = "llama-2-70b";
  inputs.gpus = 1024;
  inputs.global_batch = 1024;
  return inputs;
}

// The planner's search for `inputs`, computed here without the GUI.
inline planner::PlanSearchResult planner_search(const PlannerInputs& inputs) {
  auto model = planner::load_model(inputs.model);
  planner::ClusterSpec cluster;
  if (!model || make_cluster_spec(inputs, cluster)) qFatal("test inputs are invalid");
  planner::PlanRequest request;
  if (make_plan_request(inputs, cluster, request)) qFatal("test inputs are invalid");
  auto result = planner::search_plans(model.value(), request);
  if (!result) qFatal("%s", result.error().message.c_str());
  return std::move(result).value();
}

// The request tessera train runs for tiny-gpt2: fp32 on the CPU, no GPU runtime.
inline planner::EstimateRequest cpu_training_request() {
  planner::EstimateRequest request;
  request.training.precision = planner::Precision::fp32;
  request.training.micro_batch_size = 4;
  request.training.seq_len = 64;
  request.plugin.gradient_as_bucket_view = true;
  request.assumptions.cuda_context_bytes = 0;
  request.assumptions.allocator_reserve_fraction = 0;
  request.assumptions.cublas_workspace_bytes = 0;
  request.assumptions.nccl_bytes_per_group = 0;
  return request;
}

// A metrics.json as `tessera train` writes it, for tiny-gpt2 on the CPU, whose
// activations measure 80% of the prediction and everything else as predicted.
inline std::string metrics_json(const planner::Model& model, const planner::EstimateRequest& request, const MemoryBreakdown& predicted) {
  nlohmann::json categories = nlohmann::json::object();
  for (MemoryCategory c : kAllMemoryCategories) {
    const int64_t device = c == MemoryCategory::activations ? predicted[c].device * 8 / 10 : predicted[c].device;
    categories[std::string(to_string(c))] = nlohmann::json{{"device_bytes", device}, {"host_bytes", 0}};
  }
  nlohmann::json doc{{"schema", 1}, {"kind", "metrics"}, {"device", "cpu"}, {"model", planner::model_to_json(model)}};
  doc.update(planner::request_to_json(request));
  doc["ranks"] = nlohmann::json::array({nlohmann::json{{"ranks", nlohmann::json::array({0, 0})}, {"categories", categories}}});
  doc["tokens_per_s"] = 1000.0;
  return doc.dump(2);
}

}  // namespace tessera::gui::test
