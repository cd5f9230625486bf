#include "measured_trace.h"

#include <nlohmann/json.hpp>

#include "tessera/planner/rank_groups.h"

namespace tessera::cli {
namespace {

using nlohmann::ordered_json;

constexpr const char* kLaneNames[engine::kNumTimelineLanes] = {"compute", "data-parallel communication", "tensor-parallel communication",
                                                                "pipeline communication", "context-parallel communication"};

// The simulator's names where there is one (F3 and B3: micro-batch 3's forward and backward).
std::string event_name(const engine::TimelineEvent& e) {
  switch (e.kind) {
    case engine::TimelineKind::forward: return "F" + std::to_string(e.micro_batch);
    case engine::TimelineKind::backward: return "B" + std::to_string(e.micro_batch);
    case engine::TimelineKind::gradient_reduction: return "gradient reduction";
    case engine::TimelineKind::optimizer_step: return "optimizer step";
    case engine::TimelineKind::all_reduce: return "all_reduce";
    case engine::TimelineKind::reduce_scatter: return "reduce_scatter";
    case engine::TimelineKind::all_gather: return "all_gather";
    case engine::TimelineKind::broadcast: return "broadcast";
    case engine::TimelineKind::send: return "send";
    case engine::TimelineKind::recv: return "recv";
    case engine::TimelineKind::barrier: return "barrier";
  }
  return "?";
}

const char* category(const engine::TimelineEvent& e) {
  switch (e.kind) {
    case engine::TimelineKind::forward: return "forward";
    case engine::TimelineKind::backward: return "backward";
    case engine::TimelineKind::gradient_reduction: return "gradient_reduction";
    case engine::TimelineKind::optimizer_step: return "optimizer";
    default:
      switch (e.lane) {
        case engine::TimelineLane::tensor_parallel: return "tensor_parallel";
        case engine::TimelineLane::pipeline_parallel: return "pipeline_parallel";
        case engine::TimelineLane::context_parallel: return "context_parallel";
        default: return "data_parallel";
      }
  }
}

}  // namespace

std::string measured_trace_json(const std::vector<std::vector<engine::TimelineEvent>>& timelines, const planner::ParallelLayout& layout,
                                const std::string& title) {
  ordered_json events = ordered_json::array();
  for (size_t rank = 0; rank < timelines.size(); ++rank) {
    const int pid = static_cast<int>(rank) + 1;
    const planner::RankCoordinates at = planner::rank_coordinates(layout, static_cast<int64_t>(rank));
    const std::string name = "rank " + std::to_string(rank) + ": dp " + std::to_string(at.dp_rank) + ", tp " + std::to_string(at.tp_rank) + ", pp " +
                             std::to_string(at.pp_rank) + (layout.cp > 1 ? ", cp " + std::to_string(at.cp_rank) : "");
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", rank}}}});
    // The ring attention's lane only where there is a ring.
    const int lanes = layout.cp > 1 ? engine::kNumTimelineLanes : static_cast<int>(engine::TimelineLane::context_parallel);
    for (int lane = 0; lane < lanes; ++lane) {
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", lane}, {"args", {{"name", kLaneNames[lane]}}}});
    }
    for (const engine::TimelineEvent& e : timelines[rank]) {
      ordered_json args = ordered_json::object();
      if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
      if (e.bytes >= 0) args["bytes"] = e.bytes;
      events.push_back({{"name", event_name(e)},
                        {"cat", category(e)},
                        {"ph", "X"},
                        {"ts", e.start_s * 1e6},
                        {"dur", e.duration_s * 1e6},
                        {"pid", pid},
                        {"tid", static_cast<int>(e.lane)},
                        {"args", args}});
    }
  }
  ordered_json trace;
  trace["traceEvents"] = events;
  trace["displayTimeUnit"] = "ms";
  trace["otherData"] = {{"generator", "Tessera (tessera train: the last step, measured)"}, {"run", title}};
  return trace.dump(1) + "\n";
}

}  // namespace tessera::cli
