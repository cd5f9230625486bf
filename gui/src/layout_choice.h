// One layout set by hand, as `tessera estimate` takes it: plugin, tp, pp,
// micro-batch size, pipeline schedule and model chunks, ZeRO stage, CPU
// offload, recompute, sequence parallelism, context parallelism and hybrid
// sharding's replicas. dp follows the GPU count and the
// micro-batches the global batch. Applied to the plan in view, so the settings
// the editor does not show (Gemini's placement, FSDP's strategy, buckets) stay its own.
#pragma once

#include <cstdint>

#include "tessera/planner/search.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::gui {

struct LayoutChoice {
  planner::PluginKind plugin = planner::PluginKind::torch_ddp;
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t micro_batch = 1;
  planner::PipelineSchedule schedule = planner::PipelineSchedule::one_f_one_b;
  int64_t model_chunks = 1;  // interleaved schedule only
  int zero_stage = 0;        // low_level_zero and hybrid_parallel
  bool cpu_offload = false;  // ZeRO plugins: optimizer states and master weights on the host; torch_fsdp: every shard
  planner::RecomputeMode recompute = planner::RecomputeMode::none;
  int64_t recompute_num_layers = 0;  // full recompute: the first blocks of each chunk; 0 = every block
  bool sequence_parallel = false;  // tp > 1
  int64_t cp = 1;                  // context-parallel ranks per sequence (--cp)
  int64_t dp_replicate = 1;        // hybrid sharding's replicas (--dp-replicate)
  bool operator==(const LayoutChoice&) const = default;
};

LayoutChoice layout_choice_of(const planner::EstimateRequest& plan);

// `choice` applied to `plan` under `inputs` (GPU count, global batch, training settings).
// An error names what does not divide: tp × pp × cp into the GPUs, the global batch into
// dp × micro-batch. Whether the model takes the layout is estimate_memory's to say.
Result<planner::EstimateRequest> layout_request(const LayoutChoice& choice, const planner::EstimateRequest& plan, const planner::PlanRequest& inputs);

}  // namespace tessera::gui
