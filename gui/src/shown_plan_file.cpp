#include "shown_plan_file.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/planner/report.h"

namespace tessera::gui {

Result<PlanInFile> shown_plan_file(const PlannerSession& session) {
  const ShownPlan& shown = *session.shownPlan();
  const std::string description = planner::describe_plan(shown.request);
  const auto& result = session.searchResult();
  planner::PlanSearchResult one;
  const planner::PlanSearchResult* ranking = &one;
  size_t index = 0;
  if (result && !session.searching() && !session.rankingIsStale()) {
    const auto found = std::find_if(result->plans.begin(), result->plans.end(),
                                    [&](const planner::Candidate& c) { return planner::describe_plan(c.request) == description; });
    if (found != result->plans.end()) {
      ranking = result.get();
      index = static_cast<size_t>(found - result->plans.begin());
    }
  }
  if (ranking == &one) {
    // The largest micro-batch that fits is the search's to know; the exporters do not read it.
    one.plans.push_back(planner::Candidate{shown.request, shown.memory, shown.simulation, shown.request.training.micro_batch_size});
    one.plans.front().simulation.events.clear();
  }
  const nlohmann::json doc =
      planner::plan_document(session.model(), session.inputs().model, session.planRequest(), *ranking, static_cast<int>(ranking->plans.size()));
  auto file = planner::parse_plan_file(doc.dump(), "the plan in view");
  if (!file) return file.error();
  return PlanInFile{std::move(file).value(), index};
}

}  // namespace tessera::gui
