#include "tessera/planner/memory_timeline.h"

#include <algorithm>

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;

// A change of the bytes in use at one moment.
struct Change {
  double at_s = 0;
  Cat category = Cat::activations;
  int64_t bytes = 0;
};

// What the stage's passes allocate and free, from its compute lane's events.
// A forward pass allocates its blocks' share at the start of each block (the
// logits with the last), a backward frees each share at the end of its block
// (the logits with the first), as autograd frees saved tensors block by block.
std::vector<Change> pass_changes(const StageActivations& parts, const StageShape& stage, const std::vector<TraceEvent>& events) {
  std::vector<Change> changes;
  const int compute_lane = 2 * stage.stage;
  for (const TraceEvent& e : events) {
    if (e.lane != compute_lane || e.micro_batch < 0) continue;
    const auto chunk = static_cast<size_t>(e.chunk);
    const bool forward = e.category == "forward";
    const bool last_chunk = chunk + 1 == parts.pass_bytes.size();
    const int64_t logits = last_chunk ? parts.logits_per_pass : 0;
    const int64_t kept = parts.pass_bytes[chunk] - logits;
    const int64_t blocks = std::max(1, stage.chunks[chunk].num_layers);
    const double end_s = e.start_s + e.duration_s;
    const auto block_start = [&](int64_t k) { return e.start_s + e.duration_s * static_cast<double>(k) / static_cast<double>(blocks); };
    // Where the working set is the recomputed blocks' and follows the loss, the
    // forward holds none of it and the backward frees the logits as it starts.
    const bool logits_first = !forward && logits > 0 && parts.working_after_logits;
    const int64_t transient = (forward && parts.working_after_logits ? 0 : parts.working) + (forward ? 0 : parts.backward_scratch);
    changes.push_back({e.start_s, Cat::activations, transient});
    changes.push_back({end_s, Cat::activations, -transient});
    for (int64_t k = 0; k < blocks; ++k) {
      // The last block's share takes the remainder of the division.
      const int64_t share = k + 1 < blocks ? kept / blocks : kept - (blocks - 1) * (kept / blocks);
      if (forward) {
        changes.push_back({block_start(k), Cat::activations, share});
      } else {
        changes.push_back({k + 1 < blocks ? block_start(k + 1) : end_s, Cat::activations, -share});
      }
    }
    if (forward) {
      changes.push_back({block_start(blocks - 1), Cat::logits, logits});
    } else {
      changes.push_back({logits_first ? e.start_s : blocks > 1 ? block_start(1) : end_s, Cat::logits, -logits});
    }
  }
  // Frees before allocations at the same moment: a pass ending as the next begins
  // never holds both working sets.
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return a.at_s != b.at_s ? a.at_s < b.at_s : (a.bytes < 0) > (b.bytes < 0);
  });
  return changes;
}

RankMemoryTimeline row_timeline(const StageActivations& parts, const StageShape& stage, const RankMemory& row, const StepSimulation& simulation) {
  RankMemoryTimeline timeline;
  timeline.first_rank = row.first_rank;
  timeline.last_rank = row.last_rank;
  timeline.stage = row.first_stage;
  timeline.step_time_s = simulation.step_time_s;
  MemoryBreakdown held;  // what is allocated before the step and kept through it
  for (Cat c : kAllMemoryCategories) {
    if (c != Cat::activations && c != Cat::logits) held.add(c, MemorySpace::device, row.bytes[c].device);
  }
  timeline.points.push_back({0, held});
  for (const Change& change : pass_changes(parts, stage, simulation.events)) {
    if (change.bytes == 0) continue;
    if (timeline.points.back().start_s != change.at_s) {
      // A moment whose changes cancelled out is no point of its own.
      if (timeline.points.size() > 1 && timeline.points.back().bytes == timeline.points[timeline.points.size() - 2].bytes) timeline.points.pop_back();
      timeline.points.push_back({change.at_s, timeline.points.back().bytes});
    }
    timeline.points.back().bytes.add(change.category, MemorySpace::device, change.bytes);
  }
  for (size_t i = 1; i < timeline.points.size(); ++i) {
    if (timeline.points[i].bytes.device_total() > timeline.points[timeline.peak].bytes.device_total()) timeline.peak = i;
  }
  return timeline;
}

}  // namespace

std::vector<RankMemoryTimeline> memory_timeline(const Model& model, const EstimateRequest& request, const MemoryEstimate& estimate,
                                                const StepSimulation& simulation) {
  const std::vector<StageShape> stages = stage_shapes(model, request);
  std::vector<RankMemoryTimeline> timelines;
  for (const RankMemory& row : estimate.ranks) {
    const StageShape& stage = stages[static_cast<size_t>(row.first_stage)];
    timelines.push_back(row_timeline(stage.activations, stage, row, simulation));
  }
  return timelines;
}

}  // namespace tessera::planner
