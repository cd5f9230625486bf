// What the user sets in the input panel, and how it becomes the planner's
// PlanRequest. Errors come back tagged with the control that causes them, so
// the panel can show each one next to its control.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tessera/planner/cluster.h"
#include "tessera/planner/search.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::gui {

using planner::ActivationProfile;
using planner::OptimizerKind;
using planner::PluginKind;
using planner::Precision;
using planner::RecomputeMode;

struct PlannerInputs {
  std::string model = "llama-2-13b";  // a shipped model's name or the path of a config.json
  std::string cluster;                // a shipped cluster's name; empty: gpu × gpus below
  std::string gpu = "h100-80g";       // a shipped GPU's name, a profile path, or "cpu" (gpu_profile)
  int64_t gpus = 16;
  int64_t gpus_per_node = 8;
  double inter_node_gbit_s = 400;
  int64_t global_batch = 32;          // sequences per optimizer step
  int64_t seq_len = 4096;
  Precision precision = Precision::bf16;
  OptimizerKind optimizer = OptimizerKind::adamw;
  ActivationProfile activation_profile = ActivationProfile::flash;  // as --activation-profile
  bool torch_compile = false;  // as --torch-compile: the hf* profiles and torchtitan's Llama fused, not run op by op
  planner::TransformersVersion transformers_version = planner::kMeasuredTransformers;  // as --transformers-version (the hf* profiles)
  std::optional<RecomputeMode> recompute;  // empty: the search tries none, selective and full
  std::optional<PluginKind> plugin;        // empty: every plugin of the runtime
  planner::Runtime runtime = planner::Runtime::colossalai;  // as --runtime: whose model states, and so which plugins are searched
  bool pin_memory = true;  // as --pin-memory: Gemini's pinned chunk copies, DeepSpeed's pinned offload buffers
  std::string memory_headroom = "0";       // what every GPU must leave free: GiB ("2") or a percentage ("10%"), as --memory-headroom
  bool operator==(const PlannerInputs&) const = default;
};

enum class InputField { model, cluster, gpu, gpus, network, global_batch, seq_len, precision, optimizer, activation_profile, recompute, plugin, runtime, memory_headroom };
inline constexpr int kNumInputFields = 14;

struct InputError {
  InputField field = InputField::model;
  std::string message;
};

// A GPU by name: a shipped GPU, a profile's path, or "cpu", the machine's own
// CPU and RAM as `tessera train` runs on them (planner::host_cpu_profile).
Result<planner::GpuProfile> gpu_profile(const std::string& name);

// The last GPU profile read by name, kept while the inputs name it (as the
// session keeps its model): a control change does not read its file again.
class GpuProfileCache {
 public:
  Result<planner::GpuProfile> get(const std::string& name);

 private:
  std::optional<std::pair<std::string, planner::GpuProfile>> last_;
};

// The cluster the inputs describe (a shipped cluster, or gpus of one GPU kind),
// the GPU profile taken from `gpus` where one is given.
std::optional<InputError> make_cluster_spec(const PlannerInputs& inputs, planner::ClusterSpec& out, GpuProfileCache* gpus = nullptr);

// The planner's request for these inputs on `cluster`; an error for a memory headroom it cannot read.
std::optional<InputError> make_plan_request(const PlannerInputs& inputs, const planner::ClusterSpec& cluster, planner::PlanRequest& out);

// The control an error message of the planner is about: the first command-line
// option it names (the planner's messages name the option to change, e.g. "--seq 9000 exceeds ...").
InputField field_of_error(std::string_view message);
// The same, where a message names two options ("--global-batch or --seq is too
// large"): the one whose value in `inputs` lies beyond the planner's limit.
InputField field_of_error(std::string_view message, const PlannerInputs& inputs);

}  // namespace tessera::gui
