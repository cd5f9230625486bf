#include "tessera/planner/cluster.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "tessera/planner/json_io.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

Error invalid(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

Result<double> number_field(const json& root, const char* key, const std::string& source, double min_value, double max_value,
                            std::optional<double> fallback = std::nullopt) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    if (fallback) return *fallback;
    return make_error(ErrorCode::parse_error, source + ": missing field '" + key + "'");
  }
  if (!it->is_number()) return make_error(ErrorCode::parse_error, source + ": field '" + key + "' must be a number");
  const double value = it->get<double>();
  if (!(value >= min_value && value <= max_value)) {
    return make_error(ErrorCode::parse_error, source + ": field '" + key + "' must lie in [" + format_number(min_value) + ", " +
                                                  format_number(max_value) + "], got " + format_number(value));
  }
  return value;
}

}  // namespace

double ClusterSpec::intra_node_bytes_per_s() const {
  const double gbps = intra_node_gbps > 0 ? intra_node_gbps : (gpu.nvlink_gbps > 0 ? gpu.nvlink_gbps / 2 : gpu.pcie_gbps);
  return gbps * 1e9;
}

Result<ClusterSpec> make_cluster(const GpuProfile& gpu, int64_t gpus, int64_t gpus_per_node, double inter_node_gbit_s) {
  if (gpus <= 0) return invalid("--gpus must be a positive integer, got " + std::to_string(gpus));
  if (gpus_per_node <= 0 || gpus_per_node > 1024) return invalid("--gpus-per-node must lie in [1, 1024], got " + std::to_string(gpus_per_node));
  if (gpus > (int64_t{1} << 20)) return invalid("--gpus must be at most 1048576, got " + std::to_string(gpus));
  if (!(inter_node_gbit_s > 0 && inter_node_gbit_s <= 1e6)) return invalid("--inter-node-gbps must lie in (0, 1e6] Gbit/s per GPU");
  ClusterSpec c;
  c.name = "cli";
  c.gpu = gpu;
  if (gpus < gpus_per_node) {
    c.num_nodes = 1;
    c.gpus_per_node = gpus;
  } else {
    if (gpus % gpus_per_node != 0) {
      return invalid("--gpus " + std::to_string(gpus) + " is not a whole number of nodes of --gpus-per-node " + std::to_string(gpus_per_node));
    }
    c.num_nodes = gpus / gpus_per_node;
    c.gpus_per_node = gpus_per_node;
  }
  c.inter_node_gbit_s = inter_node_gbit_s;
  return c;
}

Result<ClusterSpec> parse_cluster(std::string_view json_text, const std::string& source) {
  auto parsed = parse_json(json_text, source);
  if (!parsed) return parsed.error();
  const json& root = parsed.value();
  if (!root.is_object()) return make_error(ErrorCode::parse_error, source + ": expected a JSON object (a cluster description)");
  auto gpu_field = root.find("gpu");
  if (gpu_field == root.end() || !(gpu_field->is_string() || gpu_field->is_object())) {
    return make_error(ErrorCode::parse_error, source + ": missing field 'gpu' (a GPU name such as \"h100-80g\", or a GPU profile object)");
  }
  // A name or path of a profile, or (in a plan made with a --gpu file) the profile itself.
  auto gpu = gpu_field->is_string() ? load_gpu(gpu_field->get<std::string>(), source + ": field 'gpu'")
                                    : parse_gpu_profile(gpu_field->dump(), source + ": field 'gpu'");
  if (!gpu) return gpu.error();
  double nodes = 0, per_node = 0, inter = 0, latency_us = 0, intra = 0, host_gib = 0, adam = 0;
  struct Field {
    const char* key;
    double* target;
    double min_value, max_value;
    std::optional<double> fallback;
  };
  for (const Field& f : {Field{"num_nodes", &nodes, 1, 1 << 17, std::nullopt}, Field{"gpus_per_node", &per_node, 1, 1024, std::nullopt},
                         Field{"inter_node_gbps", &inter, 1e-3, 1e6, std::nullopt}, Field{"inter_node_latency_us", &latency_us, 0, 1e6, kInterNodeSendLatencyUs},
                         Field{"intra_node_gbps", &intra, 0, 1e6, 0.0}, Field{"host_memory_gib_per_node", &host_gib, 0, 1e9, 1024.0},
                         Field{"cpu_adam_gparams_per_s_per_node", &adam, 1e-6, 1e6, 4.5}}) {
    auto value = number_field(root, f.key, source, f.min_value, f.max_value, f.fallback);
    if (!value) return value.error();
    *f.target = value.value();
  }
  if (nodes != static_cast<double>(static_cast<int64_t>(nodes)) || per_node != static_cast<double>(static_cast<int64_t>(per_node))) {
    return make_error(ErrorCode::parse_error, source + ": fields 'num_nodes' and 'gpus_per_node' must be whole numbers");
  }
  ClusterSpec c;
  auto name = root.find("name");
  c.name = name != root.end() && name->is_string() ? name->get<std::string>() : source;
  c.gpu = std::move(gpu).value();
  c.num_nodes = static_cast<int64_t>(nodes);
  c.gpus_per_node = static_cast<int64_t>(per_node);
  c.inter_node_gbit_s = inter;
  c.inter_node_latency_s = latency_us * 1e-6;
  c.intra_node_gbps = intra;
  c.host_memory_bytes_per_node = static_cast<int64_t>(host_gib * 1073741824.0);
  c.cpu_adam_params_per_s_per_node = adam * 1e9;
  return c;
}

}  // namespace tessera::planner
