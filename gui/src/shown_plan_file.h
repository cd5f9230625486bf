// The plan in view in a plan file, as `tessera plan` writes it and `tessera
// export` and `tessera compare` read it, and its index there: the ranking when
// the plan is one of it, so that an export says "plan 3 of 101" as `tessera
// export --plan 3` does; else a file of that one plan (a plan carried over
// capacity by a what-if change).
#pragma once

#include <cstddef>

#include "planner_session.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::gui {

struct PlanInFile {
  planner::PlanFile file;
  size_t index = 0;
};

// Needs a shown plan.
Result<PlanInFile> shown_plan_file(const PlannerSession& session);

}  // namespace tessera::gui
