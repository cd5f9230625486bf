// Helpers shared by the GUI tests: waiting for the background search, and the
// planner's own numbers for the inputs a test sets, to compare the views with.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTest>

#include "input_panel.h"
#include "main_window.h"
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

}  // namespace tessera::gui::test
