// How a pipeline splits the blocks over stages, and how many micro-batches of
// activations each stage holds at its peak.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/planner/training_config.h"

namespace tessera::planner {

struct StageLayers {
  int first_layer = 0;  // first block of the stage
  int num_layers = 0;   // blocks in the stage
};

// Blocks per stage: L / pp each, the remainder going one each to the middle
// stages (ColossalAI PipelineStageManager.distribute_layers: the first and last
// stages also hold the embedding and the head, so they get the fewer blocks).
std::vector<StageLayers> split_layers(int num_layers, int pp);

// Micro-batches whose activations a stage holds at its peak: all m under GPipe
// (Huang et al. 2019); pp - stage under 1F1B (Narayanan et al. 2021, §2.2.1:
// the first stage runs pp forwards before its first backward), at most m.
int64_t in_flight_micro_batches(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches);

enum class PipelinePass { forward, backward };

struct PipelineOp {
  int64_t micro_batch = 0;
  PipelinePass pass = PipelinePass::forward;
};

// The order in which each stage runs its passes, computed before anything runs
// (as Megatron-LM's schedules are): per stage, a list of (micro-batch, pass).
// GPipe: every forward, then every backward in reverse (Huang et al. 2019).
// 1F1B: pp - stage - 1 warm-up forwards, then one forward and one backward in
// turn, then the remaining backwards (Narayanan et al. 2021, §2.2.1).
std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule schedule, int64_t pp, int64_t num_micro_batches);

}  // namespace tessera::planner
