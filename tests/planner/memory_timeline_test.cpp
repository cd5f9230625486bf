#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

#include "tessera/planner/cluster.h"
#include "tessera/planner/memory_timeline.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;

class MemoryTimeline : public ::testing::Test {
 protected:
  const Model model = testing::shipped_model("llama-2-7b");

  struct Run {
    MemoryEstimate memory;
    StepSimulation simulation;
    std::vector<RankMemoryTimeline> timelines;
  };
  Run run(const EstimateRequest& r) const {
    const ClusterSpec cluster = make_cluster(testing::shipped_gpu("h100-80g"), r.layout.world_size(), 8, 400).value();
    Run out{testing::estimate_or_fail(model, cluster.gpu, r), {}, {}};
    auto sim = simulate_step(model, cluster, r, out.memory, SimulationSettings{}, true);
    EXPECT_TRUE(sim.ok());
    out.simulation = std::move(sim.value());
    out.timelines = memory_timeline(model, r, out.memory, out.simulation);
    return out;
  }
  static EstimateRequest hybrid(int64_t dp, int64_t pp, int64_t m, PipelineSchedule schedule, int64_t chunks = 1) {
    EstimateRequest r;
    r.plugin.kind = PluginKind::hybrid_parallel;
    r.plugin.pp_schedule = schedule;
    r.plugin.num_model_chunks = chunks;
    r.layout = ParallelLayout{dp, 1, pp, false};
    r.training.num_micro_batches = m;
    r.training.seq_len = 2048;
    return r;
  }
};

// The highest point of every row's timeline is the memory estimate's total for
// that row, and everything the passes allocate is freed by the step's end.
TEST_F(MemoryTimeline, PeakIsTheEstimateAndPassesFreeWhatTheyKeep) {
  EstimateRequest gemini = hybrid(8, 1, 2, PipelineSchedule::one_f_one_b);
  gemini.plugin.kind = PluginKind::gemini;
  for (const EstimateRequest& r : {hybrid(8, 1, 4, PipelineSchedule::one_f_one_b), hybrid(2, 4, 8, PipelineSchedule::one_f_one_b),
                                   hybrid(2, 4, 8, PipelineSchedule::interleaved, 2), hybrid(4, 2, 4, PipelineSchedule::gpipe), gemini}) {
    const Run out = run(r);
    ASSERT_EQ(out.timelines.size(), out.memory.ranks.size());
    for (size_t i = 0; i < out.timelines.size(); ++i) {
      const RankMemoryTimeline& t = out.timelines[i];
      const RankMemory& row = out.memory.ranks[i];
      EXPECT_EQ(t.points[t.peak].bytes.device_total(), row.device_total) << enum_name(r.plugin.pp_schedule) << " row " << i;
      const MemoryBreakdown& last = t.points.back().bytes;
      EXPECT_EQ(last[Cat::activations].device + last[Cat::logits].device, 0);
      EXPECT_EQ(last.device_total(), row.device_total - row.bytes[Cat::activations].device - row.bytes[Cat::logits].device);
      for (size_t p = 1; p < t.points.size(); ++p) EXPECT_GT(t.points[p].start_s, t.points[p - 1].start_s);
      EXPECT_LT(t.points.back().start_s, t.step_time_s);
    }
  }
}

// Without a pipeline each micro-batch runs forward then backward: one pass is
// kept at a time, and the peak is a backward's (the pass, the block's working
// set and the gradient scratch).
TEST_F(MemoryTimeline, OneStageHoldsOnePassAtATime) {
  EstimateRequest r = hybrid(8, 1, 4, PipelineSchedule::one_f_one_b);
  r.training.recompute = RecomputeMode::full;  // a working set and a gradient scratch besides the kept pass
  const Run out = run(r);
  const auto& sim = out.simulation;
  const StageActivations parts = stage_shapes(model, r).front().activations;
  const MemoryBreakdown& peak = out.timelines.front().points[out.timelines.front().peak].bytes;
  EXPECT_EQ(peak[Cat::activations].device + peak[Cat::logits].device, parts.pass_bytes[0] + parts.working + parts.backward_scratch);
  EXPECT_EQ(peak[Cat::logits].device, parts.logits_per_pass);
  // Held as the first backward starts, when the first forward has kept all its blocks.
  const auto first_backward = std::find_if(sim.events.begin(), sim.events.end(), [](const TraceEvent& e) { return e.name == "B0"; });
  ASSERT_NE(first_backward, sim.events.end());
  const auto& points = out.timelines.front().points;
  // The point in effect then: the last one starting no later.
  const auto after = std::upper_bound(points.begin(), points.end(), first_backward->start_s, [](double t, const MemoryPoint& p) { return t < p.start_s; });
  EXPECT_EQ(std::prev(after)->bytes.device_total(), out.memory.ranks.front().device_total);
}

// torchtitan's eager block (activations_torchtitan.h): autograd frees the loss's
// tensors before the last block's backward recomputes it, so the peak holds the
// kept passes and the larger of the logits and the working set, never both; the
// timeline's highest point is still the estimate's, micro-batch after micro-batch.
TEST_F(MemoryTimeline, TorchtitansRecomputeFollowsItsLoss) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::torch_fsdp;
  r.plugin.runtime = Runtime::torchtitan;
  r.layout.dp = 8;
  r.training.seq_len = 4096;
  r.training.num_micro_batches = 2;
  r.training.recompute = RecomputeMode::full;
  const Run out = run(r);
  const StageActivations parts = stage_shapes(model, r).front().activations;
  ASSERT_TRUE(parts.working_after_logits);
  ASSERT_GT(parts.working, 0);
  ASSERT_GT(parts.logits_per_pass, parts.working);  // Llama 2's 32,000 logits × 12 bytes a token
  const RankMemory& row = out.memory.ranks.front();
  EXPECT_EQ(row.bytes[Cat::activations].device + row.bytes[Cat::logits].device, parts.pass_bytes[0]);
  const RankMemoryTimeline& t = out.timelines.front();
  EXPECT_EQ(t.points[t.peak].bytes.device_total(), row.device_total);
  for (const MemoryPoint& p : t.points) {
    EXPECT_FALSE(p.bytes[Cat::logits].device > 0 && p.bytes[Cat::activations].device > parts.pass_bytes[0] - parts.logits_per_pass) << p.start_s;
  }
}

// A 1F1B pipeline's first stage keeps pp passes before its first backward; the last stage one.
TEST_F(MemoryTimeline, FirstPipelineStageHoldsAPassPerStage) {
  const EstimateRequest r = hybrid(2, 4, 8, PipelineSchedule::one_f_one_b);
  const Run out = run(r);
  const auto shapes = stage_shapes(model, r);
  const StageActivations& first = shapes.front().activations;
  const RankMemoryTimeline& t = out.timelines.front();
  EXPECT_EQ(t.stage, 0);
  EXPECT_EQ(t.points[t.peak].bytes[Cat::activations].device, 4 * first.pass_bytes[0] + first.working + first.backward_scratch);
}

}  // namespace
}  // namespace tessera::planner
