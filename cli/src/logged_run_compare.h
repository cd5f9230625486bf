// `tessera compare PLAN run.log`: a plan of plan.json against the Megatron-LM,
// DeepSpeed or torchtitan run it set up: step time, tokens/s, and each reported
// rank's peak memory as PyTorch counts it (training_log.h).
#pragma once

#include <iosfwd>
#include <string>

#include "compare_command.h"

namespace tessera::cli {

int run_logged_run_compare(const CompareCliOptions& options, const std::string& log_text, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
