#include "planner_inputs.h"

#include <array>
#include <utility>

#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/memory_headroom.h"
#include "tessera/planner/registry.h"

namespace tessera::gui {

Result<planner::GpuProfile> gpu_profile(const std::string& name) {
  if (name == "cpu") return planner::host_cpu_profile();
  return planner::load_gpu(name, "--gpu");
}

Result<planner::GpuProfile> GpuProfileCache::get(const std::string& name) {
  if (last_ && last_->first == name) return last_->second;
  auto gpu = gpu_profile(name);
  if (gpu) last_.emplace(name, gpu.value());
  return gpu;
}

std::optional<InputError> make_cluster_spec(const PlannerInputs& in, planner::ClusterSpec& out, GpuProfileCache* gpus) {
  if (!in.cluster.empty()) {
    auto cluster = planner::load_cluster(in.cluster, "--cluster");
    if (!cluster) return InputError{InputField::cluster, cluster.error().message};
    out = std::move(cluster).value();
    return std::nullopt;
  }
  auto gpu = gpus ? gpus->get(in.gpu) : gpu_profile(in.gpu);
  if (!gpu) return InputError{InputField::gpu, gpu.error().message};
  auto cluster = planner::make_cluster(gpu.value(), in.gpus, in.gpus_per_node, in.inter_node_gbit_s);
  if (!cluster) return InputError{field_of_error(cluster.error().message, in), cluster.error().message};
  out = std::move(cluster).value();
  return std::nullopt;
}

std::optional<InputError> make_plan_request(const PlannerInputs& in, const planner::ClusterSpec& cluster, planner::PlanRequest& out) {
  planner::PlanRequest r;
  r.cluster = cluster;
  r.global_batch_size = in.global_batch;
  r.seq_len = in.seq_len;
  r.precision = in.precision;
  r.optimizer = in.optimizer;
  r.activation_profile = in.activation_profile;
  r.torch_compile = in.torch_compile;
  r.transformers_version = in.transformers_version;
  if (in.recompute) r.recompute = {*in.recompute};
  if (in.plugin) r.plugins = {*in.plugin};
  r.runtime = in.runtime;
  r.pin_memory = in.pin_memory;
  if (Status s = planner::parse_memory_headroom(in.memory_headroom, r.assumptions); !s) return InputError{InputField::memory_headroom, s.error().message};
  out = std::move(r);
  return std::nullopt;
}

InputField field_of_error(std::string_view message) {
  // Longer options first where one is a prefix of another (--gpus-per-node, --gpus, --gpu).
  static constexpr std::array<std::pair<std::string_view, InputField>, 22> kOptions{{
      {"--model", InputField::model},           {"--cluster", InputField::cluster},      {"--gpus-per-node", InputField::gpus},
      {"--gpus", InputField::gpus},             {"--gpu", InputField::gpu},              {"--inter-node", InputField::network},
      {"--global-batch", InputField::global_batch}, {"--micro-batch", InputField::global_batch}, {"--seq", InputField::seq_len},
      {"--precision", InputField::precision},   {"--optimizer", InputField::optimizer},  {"--recompute", InputField::recompute},
      {"--plugin", InputField::plugin},         {"--dp", InputField::gpus},              {"--tp", InputField::gpus},
      {"--pp", InputField::gpus},               {"--memory-headroom", InputField::memory_headroom},
      {"--activation-profile", InputField::activation_profile}, {"--torch-compile", InputField::activation_profile},
      {"--transformers-version", InputField::activation_profile}, {"--runtime", InputField::runtime},
      {"--pin-memory", InputField::runtime},
  }};
  size_t best_at = std::string_view::npos;
  InputField best = InputField::model;
  for (const auto& [option, field] : kOptions) {
    const size_t at = message.find(option);
    if (at < best_at) {
      best_at = at;
      best = field;
    }
  }
  return best;
}

InputField field_of_error(std::string_view message, const PlannerInputs& inputs) {
  if (message.starts_with("--global-batch or --seq")) {
    return inputs.global_batch > planner::kMaxGlobalBatchSize ? InputField::global_batch : InputField::seq_len;
  }
  return field_of_error(message);
}

}  // namespace tessera::gui
