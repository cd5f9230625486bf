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

std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule schedule, int64_t pp, int64_t num_micro_batches) {
  const int64_t m = num_micro_batches;
  std::vector<std::vector<PipelineOp>> stages(static_cast<size_t>(pp));
  for (int64_t k = 0; k < pp; ++k) {
    auto& ops = stages[static_cast<size_t>(k)];
    ops.reserve(static_cast<size_t>(2 * m));
    if (schedule == PipelineSchedule::gpipe) {
      for (int64_t i = 0; i < m; ++i) ops.push_back({i, PipelinePass::forward});
      for (int64_t i = m - 1; i >= 0; --i) ops.push_back({i, PipelinePass::backward});
      continue;
    }
    const int64_t warmup = std::min(pp - k - 1, m);
    for (int64_t i = 0; i < warmup; ++i) ops.push_back({i, PipelinePass::forward});
    for (int64_t i = 0; i < m - warmup; ++i) {
      ops.push_back({warmup + i, PipelinePass::forward});
      ops.push_back({i, PipelinePass::backward});
    }
    for (int64_t i = m - warmup; i < m; ++i) ops.push_back({i, PipelinePass::backward});
  }
  return stages;
}

}  // namespace tessera::planner
