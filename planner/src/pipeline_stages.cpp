#include "tessera/planner/pipeline_stages.h"

#include <algorithm>

namespace tessera::planner {

std::vector<StageLayers> split_layers(int num_layers, int pp) {
  std::vector<StageLayers> stages(static_cast<size_t>(pp));
  const int quotient = num_layers / pp;
  const int remainder = num_layers % pp;
  const int start = pp / 2 - remainder / 2;
  int next = 0;
  for (int s = 0; s < pp; ++s) {
    const bool extra = s >= start && s < start + remainder;
    stages[static_cast<size_t>(s)] = StageLayers{next, quotient + (extra ? 1 : 0)};
    next += stages[static_cast<size_t>(s)].num_layers;
  }
  return stages;
}

int64_t in_flight_micro_batches(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches) {
  if (pp == 1) return 1;  // gradient accumulation: each micro-batch's backward frees its activations
  if (schedule == PipelineSchedule::gpipe) return num_micro_batches;
  return std::min(pp - stage, num_micro_batches);
}

}  // namespace tessera::planner
