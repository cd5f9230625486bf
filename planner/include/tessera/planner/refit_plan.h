// A plan chosen under one PlanRequest, carried over to another: the same
// plugin, layout, ZeRO stage, offload and micro-batch, with the new request's
// training settings. The desktop app re-estimates the plan the user picked this
// way when an input changes, before the new search has ranked anything.
#pragma once

#include <optional>

#include "tessera/planner/search.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// `plan` with the precision, optimizer, activation profile and sequence length
// of `request` (and its recompute mode where the request fixes one); its
// assumptions stay its own. Empty when the search for `request` could not
// return this plan: its plugin is filtered out, its layout does not cover the
// request's cluster or breaks a fixed --dp/--tp/--pp/--micro-batch/--zero-stage,
// or its micro-batches do not add up to the request's global batch. Whether the
// model divides as the layout needs is left to estimate_memory.
std::optional<EstimateRequest> refit_plan(const EstimateRequest& plan, const PlanRequest& request);

}  // namespace tessera::planner
