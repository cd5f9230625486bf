// The options of `tessera estimate`, bound to the planner's request structs.
// Later verbs (plan, train) reuse the same binding so that an option means the
// same thing everywhere.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/planner/memory_headroom.h"
#include "tessera/planner/report.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::cli {

// --torch-compile, in estimate and plan.
inline constexpr const char* kTorchCompileHelp =
    "The model runs under torch.compile: element-wise ops fused (without it the hf profiles' GPT-2 and "
    "--runtime torchtitan's Llama run op by op, each op through HBM)";

// --fused-rmsnorm and --compile-model-only, in estimate and plan.
inline constexpr const char* kFusedRmsnormHelp =
    "torchtitan's Triton RMSNorm (its norm_type fused_rmsnorm, April 2024 to February 2025): one kernel keeping the 16-bit input, "
    "not the Python RMSNorm's ops and fp32 copy (--runtime torchtitan, no --torch-compile)";
inline constexpr const char* kCompileModelOnlyHelp =
    "Under --torch-compile the blocks are compiled and the loss runs eager (torchtitan's [compile] components = [\"model\"], "
    "as every torchtitan from December 2024 to April 2025 ran; --runtime torchtitan)";

// --transformers-version, in estimate and plan.
inline constexpr const char* kTransformersVersionHelp =
    "The hf profiles: the transformers release that runs the model, X.Y (default 5.17, the one measured; 4.31-4.33 and 5.0-5.17 "
    "are modelled: older releases return fp32 logits or keep a [b, 1, s, s] attention mask)";

// --transformers-version's text into `out` (empty: keep the default); refused
// for a profile other than the hf ones, which would ignore it.
Status parse_transformers_version_option(const std::string& text, planner::ActivationProfile profile, planner::TransformersVersion& out);

// Raw option values as typed; `finish()` turns them into the planner's structs.
// The report format a file's extension names (.md .csv .html .htm .json); table for any other.
planner::ReportFormat format_from_extension(const std::string& path);

struct EstimateOptions {
  std::string model;
  std::string gpu = "h100-80g";
  std::string precision = "bf16";
  std::string optimizer = "adamw";
  std::string recompute = "none";
  std::string activation_profile = "flash";
  std::string plugin;  // empty: the runtime's plugin (runtime_plugin)
  std::string runtime = "colossalai";
  std::string pp_schedule = "1f1b";
  std::string fsdp_strategy = "full_shard";
  std::string placement = "static";
  std::string format;  // empty: from --output's extension, else table
  std::string output;  // empty: standard output
  std::string memory_headroom = "0";  // GiB, or a percentage with %
  std::string transformers_version;   // empty: the measured release
  double bucket_mb = 25;
  double reduce_bucket_m = 12;
  double cuda_context_mib = -1;
  double nccl_mib = 128;
  double cublas_workspace_mib = 32;
  planner::EstimateRequest request;

  // Parsed enums and byte sizes land in `request`; `format_value` in the format.
  planner::ReportFormat format_value = planner::ReportFormat::table;
  Status finish();
};

// Registers the options on a CLI11 (sub)command.
void add_estimate_options(CLI::App& command, EstimateOptions& options);

// --pin-memory true|false (PluginOptions::pin_memory) for estimate and plan;
// `also` ends the help with what else it sets there.
void add_pin_memory_option(CLI::App& command, bool& pin_memory, const std::string& also);

// Parses `tessera estimate` arguments (without the program and verb names):
// for tests and the fuzzer. Help requests come back as an error too.
Result<EstimateOptions> parse_estimate_arguments(const std::vector<std::string>& arguments);

}  // namespace tessera::cli
