#include "session_io.h"

#include <fstream>

#include <nlohmann/json.hpp>

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
                 {"recompute", optional_name(in.recompute)},
                 {"plugin", optional_name(in.plugin)}};
  return doc.dump(2) + "\n";
}

Result<PlannerInputs> session_from_json(std::string_view text, const std::string& source) {
  auto parsed = planner::parse_json(text, source);
  if (!parsed) return parsed.error();
  const json& doc = parsed.value();
  if (!doc.is_object() || doc.value("schema", 0) != 1 || doc.value("kind", "") != "tessera-gui-session") {
    return make_error(ErrorCode::parse_error, source + ": not a session file (expected \"schema\": 1, \"kind\": \"tessera-gui-session\")");
  }
  PlannerInputs in;
  try {
    in.model = doc.value("model", in.model);
    in.cluster = doc.value("cluster", in.cluster);
    in.gpu = doc.value("gpu", in.gpu);
    in.gpus = doc.value("gpus", in.gpus);
    in.gpus_per_node = doc.value("gpus_per_node", in.gpus_per_node);
    in.inter_node_gbit_s = doc.value("inter_node_gbps", in.inter_node_gbit_s);
    in.global_batch = doc.value("global_batch_size", in.global_batch);
    in.seq_len = doc.value("seq_len", in.seq_len);
    const std::string precision = doc.value("precision", std::string(enum_name(in.precision)));
    const std::string optimizer = doc.value("optimizer", std::string(enum_name(in.optimizer)));
    if (auto p = parse_enum<Precision>(precision)) in.precision = *p;
    else return make_error(ErrorCode::parse_error, source + ": \"precision\" must be one of " + enum_choices<Precision>());
    if (auto o = parse_enum<OptimizerKind>(optimizer)) in.optimizer = *o;
    else return make_error(ErrorCode::parse_error, source + ": \"optimizer\" must be one of " + enum_choices<OptimizerKind>());
  } catch (const json::exception& e) {
    return make_error(ErrorCode::parse_error, source + ": a field has the wrong type (" + planner::one_line(e.what(), 120) + ")");
  }
  for (Status s : {read_optional(doc, "recompute", in.recompute, source), read_optional(doc, "plugin", in.plugin, source)}) {
    if (!s) return s.error();
  }
  return in;
}

Status save_session(const std::string& path, const PlannerInputs& inputs) {
  std::ofstream out(path, std::ios::binary);
  out << session_to_json(inputs);
  if (!out.flush()) return make_error(ErrorCode::io_error, "cannot write the session to " + path);
  return Status::success();
}

Result<PlannerInputs> load_session(const std::string& path) {
  auto text = planner::read_text_file(path, "session");
  if (!text) return text.error();
  return session_from_json(text.value(), path);
}

}  // namespace tessera::gui
