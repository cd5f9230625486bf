// Device memory in use over one simulated step, per rank row of the memory
// estimate, stacked by category: what PyTorch's memory snapshot viewer shows
// for a real step, predicted from the simulator's pass-by-pass schedule.
//
// The planner allocates in this order: model states, buffers, workspaces and
// the runtime reserve are held for the whole step (allocated before it, as the
// memory model counts them); each forward pass of a micro-batch keeps its
// activations (and the logits, on the last stage) from its start until the end
// of its backward; a block running holds its working set, the backward pass its
// activation-gradient scratch besides (memory_model.h, StageActivations). The
// highest point is therefore the memory estimate's total for the row.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/memory_categories.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// The device bytes in use from start_s until the next point's start (the last until the step's end).
struct MemoryPoint {
  double start_s = 0;
  MemoryBreakdown bytes;  // device bytes only
};

struct RankMemoryTimeline {
  int64_t first_rank = 0;  // the estimate's rank row this timeline is for
  int64_t last_rank = 0;
  int stage = 0;
  std::vector<MemoryPoint> points;  // in time order; the first at 0
  double step_time_s = 0;
  size_t peak = 0;                  // the point with the most bytes in use (the first such)
};

// One timeline per row of `estimate` (same order). `simulation` is the same
// request's, simulated with its events.
std::vector<RankMemoryTimeline> memory_timeline(const Model& model, const EstimateRequest& request, const MemoryEstimate& estimate,
                                                const StepSimulation& simulation);

}  // namespace tessera::planner
