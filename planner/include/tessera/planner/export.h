// `tessera export`: a plan from plan.json (plan_file.h) in the form another
// tool runs or shows.
//
//   colossalai  a Python training script for ColossalAI's Booster API with the
//               plan's plugin, its arguments mapped one to one from the plan's
//               settings, the model's config.json embedded, gradient
//               accumulation and (tp × pp plans) the pipeline schedule
//   deepspeed   ds_config.json for the plans DeepSpeed's ZeRO can express
//               (DDP, ZeRO-1/2, FSDP, Gemini with all-or-nothing offload)
//   megatron    a bash script that runs Megatron-LM's pretrain_gpt.py under
//               torchrun with the plan's layout, states, recompute and precision
//               (plans made under --runtime megatron)
//   perfetto    a Chrome trace (JSON) of one simulated step, lane by lane, for
//               ui.perfetto.dev or chrome://tracing
//   torchtitan  a TOML job config for torchtitan 0.2.2's trainer with the plan's
//               FSDP2 layout, batch, recompute and precision, the model as the
//               llama3 flavor of its shape (plans made under --runtime torchtitan)
//
// Each function takes the parsed plan file and the plan's 0-based index in
// file.plans (`--plan N` is index N - 1). A plan that the target cannot express
// is an error of code `unsupported` that says why.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

enum class ExportTarget { colossalai, deepspeed, megatron, perfetto, torchtitan };

inline constexpr std::array<EnumName<ExportTarget>, 5> kExportTargetNames{{{ExportTarget::colossalai, "colossalai"},
                                                                           {ExportTarget::deepspeed, "deepspeed"},
                                                                           {ExportTarget::megatron, "megatron"},
                                                                           {ExportTarget::perfetto, "perfetto"},
                                                                           {ExportTarget::torchtitan, "torchtitan"}}};
inline std::span<const EnumName<ExportTarget>> enum_names(ExportTarget) { return kExportTargetNames; }

Result<std::string> export_colossalai(const PlanFile& file, size_t plan_index);
Result<std::string> export_deepspeed(const PlanFile& file, size_t plan_index);
Result<std::string> export_megatron(const PlanFile& file, size_t plan_index);
Result<std::string> export_perfetto(const PlanFile& file, size_t plan_index);
Result<std::string> export_torchtitan(const PlanFile& file, size_t plan_index);

// One of them by target.
Result<std::string> export_plan(const PlanFile& file, size_t plan_index, ExportTarget target);

}  // namespace tessera::planner
