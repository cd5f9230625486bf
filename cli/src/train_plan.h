// `tessera train --plan p.json`: a plan file read once, for the CPU engine
// and the GPU step alike. The plan's best row (or --plan-number N's) sets the model, the training
// options, the layout and the plugin. Its activation profile (the planner's
// flash, hf, megatron, ...: what another runtime keeps for backward) becomes
// the engine's own, `tessera` on the CPU and `tessera_gpu` on GPUs, so that
// DIR/plan.json is the plan as the engine runs it, held to what the engine's
// ledger books; predicted_trace.json is the plan itself as the simulator
// runs it on the plan's GPUs.
#pragma once

#include <cstdint>
#include <string>

#include "estimate_options.h"
#include "tessera/planner/hardware.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::cli {

struct TrainedPlan {
  planner::EstimateRequest request;     // the plan's row: its layout and plugin replace the parsed options'
  planner::ActivationProfile profile{}; // the plan's own activation profile, which the engine's replaces
  std::string gpu;                      // the GPU profile the plan was made for
  int64_t gpu_memory_bytes = 0;         // and that GPU's memory
};

// What the engine keeps for backward: the `tessera` profile on the CPU, `tessera_gpu` on GPUs.
planner::ActivationProfile engine_activation_profile(bool on_gpu);

// Sets the model and training options of `e` (train's, before
// EstimateOptions::finish) from plan `number` of `path` (1: the best), with the
// engine's activation profile (the GPU step's when `on_gpu`).
Result<TrainedPlan> apply_plan(const std::string& path, int64_t number, EstimateOptions& e, bool on_gpu);

// A check's refusal of a setting the plan made (its message starts with the
// option), said as the plan's: the fix goes to `tessera plan`.
Error plan_setting_refused(const std::string& path, const Error& refusal);

// One line where `gpu` (train's --gpu, as the run sees it: --device-memory's
// size where given) is another GPU than the plan was made for, else "": the
// run goes on, estimated against `gpu`; where `gpu` has more memory than the
// plan's, --device-memory would hold the run to the plan's GPU's.
std::string other_gpu_warning(const TrainedPlan& plan, const std::string& path, const planner::GpuProfile& gpu);

// What DIR/plan.json holds, for the run's last line.
std::string plan_files_note(const TrainedPlan& plan, bool on_gpu);

// The simulator's trace of the plan's first (the trained) plan, as `tessera
// export --to perfetto` writes it, beside the measured run/trace.json.
Status write_predicted_trace(const std::string& plan_path, int64_t number, const std::string& path);

}  // namespace tessera::cli
