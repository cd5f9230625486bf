// JSON forms of the planner's inputs and results, shared by the estimate
// report, plan.json and the exporters, so that a key is spelled in one place.
// Plugin settings carry ColossalAI's argument names (tp_size, zero_stage,
// placement_policy, ...) so that the exports map one to one.
#pragma once

#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "tessera/planner/cluster.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/model.h"
#include "tessera/planner/simulate.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Parses a JSON document; a syntax error, or a number out of double's range,
// becomes "SOURCE: not valid JSON: ..." on one line.
Result<nlohmann::json> parse_json(std::string_view text, const std::string& source);

// object[key] when `object` is an object holding a T there, else `fallback`.
// Unlike json::value, a mistyped key ("schema": "1") does not throw: files a
// user edits by hand reach these reads.
template <typename T>
T value_or(const nlohmann::json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!it->is_number_integer()) return fallback;  // 2e29 into an int64 would be undefined behaviour
  }
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

nlohmann::json model_to_json(const Model& model);

// {"plugin": "gemini", "settings": {...}, "layout": {...}, "training": {...}, "assumptions": {...}}
nlohmann::json request_to_json(const EstimateRequest& request);
// Reads what request_to_json wrote; errors name the key and `source`.
Result<EstimateRequest> request_from_json(const nlohmann::json& object, const std::string& source);

// Every distinct rank with every category's device_bytes and host_bytes.
nlohmann::json ranks_to_json(const MemoryEstimate& estimate);

// The cluster in the format of data/hardware/clusters/*.json (parse_cluster reads it back).
nlohmann::json cluster_to_json(const ClusterSpec& cluster);

nlohmann::json breakdown_to_json(const StepBreakdown& breakdown);

}  // namespace tessera::planner
