// Helpers shared by the exporters (export_*.cpp); not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::planner::export_detail {

// Whether the plan at `index` exists and is a valid request for the file's
// model and GPU; errors name --plan with the 1-based numbers a user types.
Status check_plan(const PlanFile& file, size_t index);

// The plan's object in the file (description, predictions), or an empty object.
const nlohmann::json& plan_json(const PlanFile& file, size_t index);

// Optimizer steps take this many micro-batches per data-parallel rank outside the
// pipeline: the micro-batches themselves without one, 1 when the pipeline runs them.
int64_t gradient_accumulation_steps(const EstimateRequest& request);

// Sequences per optimizer step: micro-batch × micro-batches × dp.
int64_t sequences_per_step(const EstimateRequest& request);

// An error of code `unsupported` that names the target: "--to deepspeed: ...".
Error cannot_express(const char* target, const std::string& why);

}  // namespace tessera::planner::export_detail
