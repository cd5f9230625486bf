// A stage's schedule with its point-to-point calls; see parallel/pipeline_transfers.h.
#include "tessera/engine/parallel/pipeline_transfers.h"

namespace tessera::engine {

namespace {

bool is_forward(const planner::PipelineOp& op) { return op.pass == planner::PipelinePass::forward; }

// Where pass `op` of `stage` sits in the chain of pp · chunks virtual stages
// (chunk j of stage s is virtual stage j · pp + s, pipeline_stages.h, stage_chunks).
struct VirtualStage {
  int64_t pp, index, count;
  VirtualStage(const planner::PipelineOp& op, int64_t pp, int64_t stage, int64_t chunks) : pp(pp), index(op.chunk * pp + stage), count(pp * chunks) {}
  bool first() const { return index == 0; }
  bool last() const { return index == count - 1; }
  int previous_stage() const { return static_cast<int>((index - 1) % pp); }
  int next_stage() const { return static_cast<int>((index + 1) % pp); }
};

// What pass `op` receives before it runs (none on the first virtual stage's
// forwards and the last one's backwards: the tokens, the loss): an activation
// across the boundary below its virtual stage, or a gradient across the one above.
PipelineMessage input_of(const planner::PipelineOp& op, const VirtualStage& v) {
  if (is_forward(op)) return v.first() ? PipelineMessage{} : PipelineMessage{v.previous_stage(), op.micro_batch, false, v.index - 1};
  return v.last() ? PipelineMessage{} : PipelineMessage{v.next_stage(), op.micro_batch, true, v.index};
}

// What it hands on after it has run (none on the last virtual stage's forwards and the first one's backwards).
PipelineMessage output_of(const planner::PipelineOp& op, const VirtualStage& v) {
  if (is_forward(op)) return v.last() ? PipelineMessage{} : PipelineMessage{v.next_stage(), op.micro_batch, false, v.index};
  return v.first() ? PipelineMessage{} : PipelineMessage{v.previous_stage(), op.micro_batch, true, v.index - 1};
}

// The interleaved schedule's unit at pass i: a steady-state forward runs with
// the backward after it (after the warm-up every forward is one; the
// cursor's table alternates them), every other pass alone.
size_t unit_length(const std::vector<planner::PipelineOp>& passes, size_t i, int64_t warmup) {
  return static_cast<int64_t>(i) >= warmup && is_forward(passes[i]) ? 2 : 1;
}

// The message of kind `gradient` among a unit's (at most one of each kind), or none.
PipelineMessage of_kind(const std::vector<PipelineMessage>& messages, bool gradient) {
  for (const PipelineMessage& m : messages) {
    if (m.present() && m.gradient == gradient) return m;
  }
  return {};
}

}  // namespace

StageTransfers stage_transfers(planner::PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks) {
  const bool interleaved = schedule == planner::PipelineSchedule::interleaved;
  StageTransfers out;
  out.passes = planner::stage_schedule(schedule, pp, stage, num_micro_batches, chunks);
  const int64_t warmup = planner::StageScheduleCursor(schedule, pp, stage, num_micro_batches, chunks).warmup();
  // The inputs or (input_of) outputs (output_of) of passes [begin, begin + length).
  const auto messages = [&](size_t begin, size_t length, PipelineMessage (*message_of)(const planner::PipelineOp&, const VirtualStage&)) {
    std::vector<PipelineMessage> found;
    for (size_t p = begin; p < begin + length; ++p) found.push_back(message_of(out.passes[p], VirtualStage(out.passes[p], pp, stage, interleaved ? chunks : 1)));
    return found;
  };
  std::vector<PipelineMessage> outputs;  // the previous unit's
  for (size_t i = 0;; ) {
    const size_t length = i == out.passes.size() ? 0 : interleaved ? unit_length(out.passes, i, warmup) : 1;
    const std::vector<PipelineMessage> inputs = messages(i, length, input_of);
    if (interleaved) {
      for (bool gradient : {false, true}) {
        const PipelineTransfer call{of_kind(outputs, gradient), of_kind(inputs, gradient), i};
        if (call.send.present() || call.recv.present()) out.transfers.push_back(call);
      }
    } else {
      out.transfers.push_back({outputs.empty() ? PipelineMessage{} : outputs.front(), inputs.empty() ? PipelineMessage{} : inputs.front(), i});
    }
    if (length == 0) return out;
    outputs = messages(i, length, output_of);
    i += length;
  }
}

}  // namespace tessera::engine
