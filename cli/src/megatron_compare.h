// `tessera compare PLAN megatron.log`: a plan of plan.json against the Megatron-LM
// run it launched (tessera export --to megatron): step time, tokens/s, and each
// reported rank's peak memory as PyTorch counts it (megatron_log.h).
#pragma once

#include <iosfwd>
#include <string>

#include "compare_command.h"

namespace tessera::cli {

int run_megatron_compare(const CompareCliOptions& options, const std::string& log_text, std::ostream& out, std::ostream& err);

}  // namespace tessera::cli
