// run/trace.json from the ranks' timelines: one process per rank named by its
// coordinates in the layout, three lanes, the simulator's event names.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "measured_trace.h"

namespace tessera::cli {
namespace {

using engine::TimelineEvent;
using engine::TimelineKind;
using engine::TimelineLane;

TEST(MeasuredTrace, OneProcessPerRankNamedByItsCoordinates) {
  const std::vector<std::vector<TimelineEvent>> timelines{
      {{TimelineKind::forward, TimelineLane::compute, 0, 0.0, 0.002, -1},
       {TimelineKind::all_reduce, TimelineLane::tensor_parallel, -1, 0.0005, 0.0001, 4096},
       {TimelineKind::backward, TimelineLane::compute, 0, 0.002, 0.004, -1},
       {TimelineKind::reduce_scatter, TimelineLane::data_parallel, -1, 0.006, 0.001, 8192}},
      {{TimelineKind::optimizer_step, TimelineLane::compute, -1, 0.25, 0.5, -1}}};
  const planner::ParallelLayout layout{1, 2, 1, true};
  const auto trace = nlohmann::json::parse(measured_trace_json(timelines, layout, "run"));
  std::vector<nlohmann::json> spans, names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") spans.push_back(e);
    if (e["name"] == "process_name") names.push_back(e);
  }
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0]["args"]["name"], "rank 0: dp 0, tp 0, pp 0");
  EXPECT_EQ(names[1]["args"]["name"], "rank 1: dp 0, tp 1, pp 0");
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(spans[0]["name"], "F0");
  EXPECT_EQ(spans[0]["cat"], "forward");
  EXPECT_DOUBLE_EQ(spans[0]["dur"].get<double>(), 2000.0);  // microseconds
  EXPECT_EQ(spans[1]["name"], "all_reduce");
  EXPECT_EQ(spans[1]["cat"], "tensor_parallel");
  EXPECT_EQ(spans[1]["tid"], 2);
  EXPECT_EQ(spans[1]["args"]["bytes"], 4096);
  EXPECT_EQ(spans[2]["name"], "B0");
  EXPECT_EQ(spans[3]["cat"], "data_parallel");
  EXPECT_EQ(spans[3]["tid"], 1);
  EXPECT_EQ(spans[4]["name"], "optimizer step");
  EXPECT_EQ(spans[4]["pid"], 2);
  EXPECT_DOUBLE_EQ(spans[4]["ts"].get<double>(), 250000.0);
  // Without context parallelism there is no ring, and no lane for it.
  for (const auto& e : trace["traceEvents"]) EXPECT_NE(e["args"].value("name", ""), "context-parallel communication");
}

// Under context parallelism the ranks are named by their cp coordinate too,
// and the ring attention's sends have a lane of their own.
TEST(MeasuredTrace, TheRingAttentionHasALaneUnderContextParallelism) {
  const std::vector<std::vector<TimelineEvent>> timelines{{{TimelineKind::send, TimelineLane::context_parallel, -1, 0.001, 0.0002, 65536}}, {}};
  const planner::ParallelLayout layout{1, 1, 1, false, 2};
  const auto trace = nlohmann::json::parse(measured_trace_json(timelines, layout, "run"));
  std::vector<std::string> names, lanes;
  std::vector<nlohmann::json> spans;
  for (const auto& e : trace["traceEvents"]) {
    if (e["name"] == "process_name") names.push_back(e["args"]["name"]);
    if (e["name"] == "thread_name" && e["pid"] == 1) lanes.push_back(e["args"]["name"]);
    if (e["ph"] == "X") spans.push_back(e);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"rank 0: dp 0, tp 0, pp 0, cp 0", "rank 1: dp 0, tp 0, pp 0, cp 1"}));
  ASSERT_EQ(lanes.size(), 5u);
  EXPECT_EQ(lanes[4], "context-parallel communication");
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0]["name"], "send");
  EXPECT_EQ(spans[0]["cat"], "context_parallel");
  EXPECT_EQ(spans[0]["tid"], 4);
  EXPECT_EQ(spans[0]["args"]["bytes"], 65536);
}

}  // namespace
}  // namespace tessera::cli
