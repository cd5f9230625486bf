// Facts every report format shows, worded once: the summary line (the
// assumptions and row labels are public, in report.h).
#pragma once

#include <string>
#include <vector>

#include "tessera/planner/report.h"

namespace tessera::planner {

// "gpt2-medium (354.8M parameters) on h100-80g: torch_ddp, dp 8 × tp 1 × pp 1, bf16, adamw, ..."
std::string summary_line(const EstimateReport& report);

// Where the plan's model states come from: the runtime's formula and its source.
std::string model_states_source(const PluginOptions& plugin, Precision precision);

}  // namespace tessera::planner
