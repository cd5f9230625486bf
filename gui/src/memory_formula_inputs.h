// The inputs of the formula behind one bar segment of the memory view, for
// its tooltip: the settings and sizes the planner multiplied, not a second
// computation of the bytes (those come from the planner's estimate).
#pragma once

#include <QString>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"

namespace tessera::gui {

// Lines of "name: value" for `category` on the rank row `row` of `estimate`.
QString formula_inputs(MemoryCategory category, const planner::RankMemory& row, const planner::Model& model,
                       const planner::EstimateRequest& request, const planner::MemoryEstimate& estimate);

}  // namespace tessera::gui
