// run/trace.json: the last step of a `tessera train` run as every rank
// measured it (engine/timeline.h), in the Trace Event Format that
// ui.perfetto.dev and chrome://tracing open — the measured counterpart of
// `tessera export --to perfetto`, which `tessera train --plan` writes beside
// it as run/predicted_trace.json.
#pragma once

#include <string>
#include <vector>

#include "tessera/engine/timeline.h"
#include "tessera/planner/training_config.h"

namespace tessera::cli {

// One process per rank ("rank R: dp d, tp t, pp p", and ", cp c" under
// context parallelism), a compute lane and one per communicator (data-,
// tensor-, pipeline- and, where cp > 1, context-parallel); times in microseconds
// from the step's start on each rank (the ranks agree to start a step, so
// their origins lie within that agreement's latency of each other).
std::string measured_trace_json(const std::vector<std::vector<engine::TimelineEvent>>& timelines, const planner::ParallelLayout& layout,
                                const std::string& title);

}  // namespace tessera::cli
