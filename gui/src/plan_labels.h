// Short labels for a plan's settings, shared by the plan table and the views.
#pragma once

#include <QString>

#include "tessera/planner/training_config.h"

namespace tessera::gui {

// The ZeRO stage a plugin amounts to (Rajbhandari et al. 2020): DDP 0, FSDP
// full shard and Gemini 3, FSDP shard-grad-op 2, ZeRO plugins their stage.
int zero_stage_of(const planner::EstimateRequest& request);
// "none", "optimizer → host", "optim 50%", "optim 100% + param 50%", "auto" (the share on the host).
// What a plan offloads; for Gemini's static placement, as many chunks as its
// fraction sends when they are known (optimizer_chunks_on_host >= 0).
QString offload_of(const planner::EstimateRequest& request, int64_t optimizer_chunks_on_host = -1, int64_t chunks = 0);
// A pipeline's schedule: "GPipe", "1F1B", "interleaved × 2"; "–" without a pipeline (pp 1).
QString schedule_of(const planner::EstimateRequest& request);
// "1.234 s", "850.0 ms", "12.5 µs".
QString seconds_text(double seconds);

}  // namespace tessera::gui
