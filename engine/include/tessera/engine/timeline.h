// What one rank did during a training step, in wall-clock time: the trainer's
// phases (each micro-batch's forward and backward, the gradient reduction's
// wait, the optimizer step) and every call of its data-, tensor- and
// pipeline-parallel communicators. `tessera train` gathers every rank's and writes them as a
// Perfetto trace (run/trace.json) beside the simulator's predicted one, so that
// the two can be held against each other.
//
// Only the last step is kept (begin_step() clears): a trace of one step, as the
// simulator's, in memory that does not grow with the run.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace tessera::engine {

// Where an event is drawn: the rank's compute, or one of its communicators.
enum class TimelineLane { compute = 0, data_parallel = 1, tensor_parallel = 2, pipeline_parallel = 3, context_parallel = 4 };
inline constexpr int kNumTimelineLanes = 5;

// What happened. The collectives' kinds follow comm::Collective's order.
enum class TimelineKind {
  forward = 0,
  backward,
  gradient_reduction,  // the wait for the data-parallel reduction after backward
  optimizer_step,
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  send,
  recv,
  barrier,
};

struct TimelineEvent {
  TimelineKind kind = TimelineKind::forward;
  TimelineLane lane = TimelineLane::compute;
  int64_t micro_batch = -1;  // forward and backward: which; -1 otherwise
  double start_s = 0;        // since the step began on this rank
  double duration_s = 0;
  int64_t bytes = -1;        // collectives: the payload (comm_types.h); -1 otherwise
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  // A new step starts now: the events so far are dropped.
  void begin_step() {
    events_.clear();
    origin_ = Clock::now();
  }
  void record(TimelineKind kind, TimelineLane lane, Clock::time_point start, Clock::time_point end, int64_t micro_batch = -1, int64_t bytes = -1) {
    events_.push_back({kind, lane, micro_batch, seconds(origin_, start), seconds(start, end), bytes});
  }
  const std::vector<TimelineEvent>& events() const { return events_; }

 private:
  static double seconds(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

  Clock::time_point origin_ = Clock::now();
  std::vector<TimelineEvent> events_;
};

}  // namespace tessera::engine
