#include "session_io.h"

#include <nlohmann/json.hpp>

#include "save_whole_file.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/text_util.h"

namespace tessera::gui {

using nlohmann::json;

namespace {

template <typename E>
json optional_name(const std::optional<E>& value) {
  return value ? json(std::string(enum_name(*value))) : json(nullptr);
}

// Reads an enum by name; null (or absent) leaves `out` empty.
template <typename E>
Status read_optional(const json& doc, const char* key, std::optional<E>& out, const std::string& source) {
  if (!doc.contains(key) || doc[key].is_null()) return Status::success();
  const auto value = doc[key].is_string() ? parse_enum<E>(doc[key].get<std::string>()) : std::nullopt;
  if (!value) return make_error(ErrorCode::parse_error, source + ": \"" + key + "\" must be one of " + enum_choices<E>() + " or null");
  out = value;
  return Status::success();
}

}  // namespace

std::string session_to_json(const PlannerInputs& in) {
  const json doc{{"schema", 1},
                 {"kind", "tessera-gui-session"},
                 {"model", in.model},
                 {"cluster", in.cluster},
                 {"gpu", in.gpu},
                 {"gpus", in.gpus},
                 {"gpus_per_node", in.gpus_per_node},
                 {"inter_node_gbps", in.inter_node_gbit_s},
                 {"global_batch_size", in.global_batch},
                 {"seq_len", in.seq_len},
                 {"precision", enum_name(in.precision)},
                 {"optimizer", enum_name(in.optimizer)},
                 {"activation_profile", enum_name(in.activation_profile)},
                 {"torch_compile", in.torch_compile},
                 {"transformers_version", planner::to_string(in.transformers_version)},
                 {"recompute", optional_name(in.recompute)},
                 {"plugin", optional_name(in.plugin)},
                 {"runtime", enum_name(in.runtime)},
                 {"pin_memory", in.pin_memory},
                 {"memory_headroom", in.memory_headroom}};
  return doc.dump(2) + "\n";
}

Result<PlannerInputs> session_from_json(std::string_view text, const std::string& source) {
  auto parsed = planner::parse_json(text, source);
  if (!parsed) return parsed.error();
  const json& doc = parsed.value();
  if (!doc.is_object() || planner::value_or(doc, "schema", 0) != 1 || planner::value_or(doc, "kind", std::string()) != "tessera-gui-session") {
    return make_error(ErrorCode::parse_error, source + ": not a session file (expected \"schema\": 1, \"kind\": \"tessera-gui-session\")");
  }
  PlannerInputs in;
  // Every field is optional; a present one must have the right type and lie within the planner's limits.
  auto field_error = [&](const char* key, const std::string& expected) {
    return make_error(ErrorCode::parse_error, source + ": \"" + key + "\" must be " + expected + ", got " + planner::one_line(doc[key].dump(), 60));
  };
  for (auto [key, out] : {std::pair{"model", &in.model}, std::pair{"cluster", &in.cluster}, std::pair{"gpu", &in.gpu},
                          std::pair{"memory_headroom", &in.memory_headroom}}) {
    if (!doc.contains(key)) continue;
    if (!doc[key].is_string()) return field_error(key, "a string");
    *out = doc[key].get<std::string>();
  }
  struct IntegerField {
    const char* key;
    int64_t* out;
    int64_t max;
  };
  for (const IntegerField& f : {IntegerField{"gpus", &in.gpus, planner::kMaxGpus}, IntegerField{"gpus_per_node", &in.gpus_per_node, planner::kMaxGpusPerNode},
                                IntegerField{"global_batch_size", &in.global_batch, planner::kMaxGlobalBatchSize},
                                IntegerField{"seq_len", &in.seq_len, planner::kMaxSeqLen}}) {
    if (!doc.contains(f.key)) continue;
    const json& value = doc[f.key];
    const std::string range = "an integer from 1 to " + std::to_string(f.max);
    if (!value.is_number_integer()) return field_error(f.key, range);
    const bool in_range = value.is_number_unsigned() ? (value.get<uint64_t>() >= 1 && value.get<uint64_t>() <= static_cast<uint64_t>(f.max))
                                                     : (value.get<int64_t>() >= 1 && value.get<int64_t>() <= f.max);
    if (!in_range) return field_error(f.key, range);
    *f.out = value.get<int64_t>();
  }
  if (doc.contains("inter_node_gbps")) {
    const json& value = doc["inter_node_gbps"];
    // The planner takes (0, 1e6] Gbit/s; the Network control shows whole Gbit/s from 1.
    if (!value.is_number() || !(value.get<double>() >= 1 && value.get<double>() <= planner::kMaxInterNodeGbitS)) {
      return field_error("inter_node_gbps", "a number of Gbit/s from 1 to 1000000");
    }
    in.inter_node_gbit_s = value.get<double>();
  }
  if (doc.contains("precision")) {
    const auto p = doc["precision"].is_string() ? parse_enum<Precision>(doc["precision"].get<std::string>()) : std::nullopt;
    if (!p) return field_error("precision", "one of " + enum_choices<Precision>());
    in.precision = *p;
  }
  if (doc.contains("optimizer")) {
    const auto o = doc["optimizer"].is_string() ? parse_enum<OptimizerKind>(doc["optimizer"].get<std::string>()) : std::nullopt;
    if (!o) return field_error("optimizer", "one of " + enum_choices<OptimizerKind>());
    in.optimizer = *o;
  }
  // Sessions saved before these controls existed hold neither: flash, not compiled, as then.
  if (doc.contains("activation_profile")) {
    const json& value = doc["activation_profile"];
    const auto a = value.is_string() ? parse_enum<ActivationProfile>(value.get<std::string>()) : std::nullopt;
    if (!a) return field_error("activation_profile", "one of " + enum_choices<ActivationProfile>());
    in.activation_profile = *a;
  }
  for (auto [key, out] : {std::pair{"torch_compile", &in.torch_compile}, std::pair{"pin_memory", &in.pin_memory}}) {
    if (!doc.contains(key)) continue;
    if (!doc[key].is_boolean()) return field_error(key, "true or false");
    *out = doc[key].get<bool>();
  }
  // Sessions saved before it hold none: ColossalAI's, as then.
  if (doc.contains("runtime")) {
    const auto r = doc["runtime"].is_string() ? parse_enum<planner::Runtime>(doc["runtime"].get<std::string>()) : std::nullopt;
    if (!r) return field_error("runtime", "one of " + enum_choices<planner::Runtime>());
    in.runtime = *r;
  }
  // Sessions saved before it hold none: the measured release, as then.
  if (doc.contains("transformers_version")) {
    const json& value = doc["transformers_version"];
    const auto v = value.is_string() ? planner::parse_transformers_version(value.get<std::string>()) : std::nullopt;
    if (!v) return field_error("transformers_version", "a release X.Y, e.g. 4.32");
    in.transformers_version = *v;
  }
  for (Status s : {read_optional(doc, "recompute", in.recompute, source), read_optional(doc, "plugin", in.plugin, source)}) {
    if (!s) return s.error();
  }
  return in;
}

Status save_session(const std::string& path, const PlannerInputs& inputs) {
  return save_whole_file(QString::fromStdString(path), session_to_json(inputs));
}

Result<PlannerInputs> load_session(const std::string& path) {
  auto text = planner::read_text_file(path, "session", planner::kMaxJsonFileBytes);
  if (!text) return text.error();
  return session_from_json(text.value(), path);
}

}  // namespace tessera::gui
