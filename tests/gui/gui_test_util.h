// Helpers shared by the GUI tests: waiting for the background search, and the
// planner's own numbers for the inputs a test sets, to compare the views with.
#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTest>

#include "main_window.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/search.h"

namespace tessera::gui::test {

// Processes events until the session's search has delivered (10 s at most).
inline bool wait_for_search(PlannerSession& session) {
  QElapsedTimer timer;
  timer.start();
  QCoreApplication::processEvents();
  while (session.searching() && timer.elapsed() < 10000) QTest::qWait(2);
  return !session.searching();
}

// The planner's search for `inputs`, computed here without the GUI.
inline planner::PlanSearchResult planner_search(const PlannerInputs& inputs) {
  auto model = planner::load_model(inputs.model);
  planner::ClusterSpec cluster;
  if (!model || make_cluster_spec(inputs, cluster)) qFatal("test inputs are invalid");
  auto result = planner::search_plans(model.value(), make_plan_request(inputs, cluster));
  if (!result) qFatal("%s", result.error().message.c_str());
  return std::move(result).value();
}

}  // namespace tessera::gui::test
