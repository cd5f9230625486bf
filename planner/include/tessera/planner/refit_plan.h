// A plan chosen under one PlanRequest, carried over to another: the same
// plugin, layout, ZeRO stage, offload and micro-batch, with the new request's
// training settings. The desktop app re-estimates the plan the user picked this
// way when an input changes, before the new search has ranked anything.
#pragma once

#include <optional>

#include "tessera/planner/search.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// `plan` with the precision, optimizer, activation profile, sequence length and
// pin_memory of `request` (and its recompute mode where the request fixes one);
// its assumptions stay its own. Empty when the search for `request` could not
// return this plan: it counts another runtime's model states, its plugin is
// filtered out, its layout does not cover the
// request's cluster or breaks a fixed --dp/--tp/--pp/--micro-batch/--zero-stage,
// or its micro-batches do not add up to the request's global batch. Whether the
// model divides as the layout needs is left to estimate_memory.
std::optional<EstimateRequest> refit_plan(const EstimateRequest& plan, const PlanRequest& request);

// What-if: `plan` carried to a request with another GPU count or global batch
// as well. The plugin, tp, pp, ZeRO stage, offload and schedule stay; dp
// becomes the GPU count over tp × pp, the micro-batch size stays where it
// divides the per-rank batch (global batch / dp), else the largest size below
// it that does, and the micro-batches make up the rest. Then as refit_plan.
// Whether the result fits is estimate_memory's to say; an error names what
// keeps the plan's shape from covering the request (e.g. 17 GPUs for tp 2 × pp 2).
Result<EstimateRequest> carry_plan(const EstimateRequest& plan, const PlanRequest& request);

}  // namespace tessera::planner
