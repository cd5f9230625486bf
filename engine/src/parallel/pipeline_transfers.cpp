// A stage's schedule with its point-to-point calls; see parallel/pipeline_transfers.h.
#include "tessera/engine/parallel/pipeline_transfers.h"

namespace tessera::engine {

namespace {

bool is_forward(const planner::PipelineOp& op) { return op.pass == planner::PipelinePass::forward; }

// What pass `op` of `stage` receives before it runs (none on the first stage's
// forwards and the last stage's backwards: the tokens, the loss).
PipelineMessage input_of(const planner::PipelineOp& op, int64_t pp, int64_t stage) {
  if (is_forward(op)) return stage > 0 ? PipelineMessage{static_cast<int>(stage - 1), op.micro_batch, false} : PipelineMessage{};
  return stage < pp - 1 ? PipelineMessage{static_cast<int>(stage + 1), op.micro_batch, true} : PipelineMessage{};
}

// What it hands on after it has run (none on the last stage's forwards and the first stage's backwards).
PipelineMessage output_of(const planner::PipelineOp& op, int64_t pp, int64_t stage) {
  if (is_forward(op)) return stage < pp - 1 ? PipelineMessage{static_cast<int>(stage + 1), op.micro_batch, false} : PipelineMessage{};
  return stage > 0 ? PipelineMessage{static_cast<int>(stage - 1), op.micro_batch, true} : PipelineMessage{};
}

}  // namespace

StageTransfers stage_transfers(planner::PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches) {
  StageTransfers out;
  out.passes = planner::stage_schedule(schedule, pp, stage, num_micro_batches, 1);
  PipelineMessage pending;  // the previous pass's output
  for (const planner::PipelineOp& op : out.passes) {
    out.transfers.push_back({pending, input_of(op, pp, stage)});
    pending = output_of(op, pp, stage);
  }
  out.transfers.push_back({pending, {}});
  return out;
}

}  // namespace tessera::engine
