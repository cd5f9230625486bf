// What a runtime keeps from one step into the next besides the model states
// (retained_between_steps.cpp): the memory a runtime logs between steps is the
// model states plus this. It is freed before the next step's peak, so it is
// not part of a rank's device_total.
#pragma once

#include <cstdint>

#include "tessera/planner/memory_model.h"

namespace tessera::planner {

// Bytes one rank of `stage` keeps from its last step until the next one runs forward.
int64_t retained_between_steps(const Model& model, const StageShape& stage, const EstimateRequest& request);

}  // namespace tessera::planner
