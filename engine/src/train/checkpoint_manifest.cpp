#include "tessera/engine/checkpoint_manifest.h"

#include <cstdint>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

namespace tessera::engine {
namespace {

using nlohmann::json;

bool is_hex(const std::string& text, size_t digits) {
  return text.size() == digits && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

Status malformed(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::parse_error, path + ": " + what + " (the checkpoint's manifest is damaged)");
}

Result<CheckpointFile> parse_file(const json& entry, const std::string& path) {
  if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("bytes") ||
      !entry["bytes"].is_number_unsigned() || !entry.contains("crc32") || !entry["crc32"].is_string()) {
    return malformed(path, "a file entry lacks name, bytes or crc32").error();
  }
  CheckpointFile file{entry["name"].get<std::string>(), FileDigest{entry["bytes"].get<int64_t>(), entry["crc32"].get<std::string>()}};
  // Names stay inside the checkpoint's directory.
  if (file.name.empty() || file.name.find('/') != std::string::npos || file.name == "." || file.name == ".." || file.name == kManifestName) {
    return malformed(path, "file name '" + file.name.substr(0, 60) + "' is not a plain file name").error();
  }
  if (file.digest.bytes < 0 || !is_hex(file.digest.crc32, 8)) return malformed(path, "file '" + file.name + "' has a bad size or crc32").error();
  return file;
}

}  // namespace

std::string manifest_to_json(const CheckpointManifest& manifest) {
  json files = json::array();
  for (const CheckpointFile& f : manifest.files) files.push_back(json{{"name", f.name}, {"bytes", f.digest.bytes}, {"crc32", f.digest.crc32}});
  json settings = json::array();
  for (const RunSetting& s : manifest.settings) settings.push_back(json{{"key", s.key}, {"option", s.option}, {"value", s.value}});
  return json{{"schema", 1}, {"kind", "checkpoint"}, {"step", manifest.step}, {"run_id", manifest.run_id}, {"files", files}, {"settings", settings}}.dump(2) +
         "\n";
}

Result<CheckpointManifest> parse_manifest(std::string_view text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception&) {
    return malformed(path, "not valid JSON").error();
  }
  if (!doc.is_object() || doc.value("schema", json()) != 1 || doc.value("kind", json()) != "checkpoint") {
    return malformed(path, "not a checkpoint manifest (\"schema\": 1, \"kind\": \"checkpoint\")").error();
  }
  CheckpointManifest manifest;
  // Unsigned in the JSON, but held in int64: larger values would turn negative.
  if (!doc.contains("step") || !doc["step"].is_number_unsigned() || doc["step"].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return malformed(path, "'step' is not a whole number from 0 to 2^63-1").error();
  }
  manifest.step = doc["step"].get<int64_t>();
  if (!doc.contains("run_id") || !doc["run_id"].is_string() || !is_hex(doc["run_id"].get<std::string>(), 32)) {
    return malformed(path, "'run_id' is not 32 hex digits").error();
  }
  manifest.run_id = doc["run_id"].get<std::string>();
  if (!doc.contains("files") || !doc["files"].is_array() || doc["files"].empty()) return malformed(path, "'files' lists no file").error();
  for (const json& entry : doc["files"]) {
    auto file = parse_file(entry, path);
    if (!file) return file.error();
    manifest.files.push_back(std::move(file).value());
  }
  if (!doc.contains("settings") || !doc["settings"].is_array()) return malformed(path, "'settings' is not a list").error();
  for (const json& entry : doc["settings"]) {
    if (!entry.is_object() || !entry.value("key", json()).is_string() || !entry.value("option", json()).is_string() ||
        !entry.value("value", json()).is_string()) {
      return malformed(path, "a setting lacks key, option or value").error();
    }
    manifest.settings.push_back({entry["key"].get<std::string>(), entry["option"].get<std::string>(), entry["value"].get<std::string>()});
  }
  return manifest;
}

std::vector<std::string> changed_settings(const std::vector<RunSetting>& saved, const std::vector<RunSetting>& now) {
  std::map<std::string, const RunSetting*> before;
  for (const RunSetting& s : saved) before[s.key] = &s;
  std::vector<std::string> changes;
  for (const RunSetting& s : now) {
    auto it = before.find(s.key);
    const std::string old_value = it == before.end() ? "(not recorded)" : it->second->value;
    if (old_value != s.value) changes.push_back(s.option + ": " + old_value + " in the checkpoint, " + s.value + " now");
    if (it != before.end()) before.erase(it);
  }
  for (const auto& [key, s] : before) changes.push_back(s->option + ": " + s->value + " in the checkpoint, not set now");
  return changes;
}

std::string new_run_id() {
  std::random_device device;  // /dev/urandom on Linux
  std::string id;
  const char* digits = "0123456789abcdef";
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = device();
    for (int nibble = 0; nibble < 8; ++nibble) id += digits[(word >> (4 * nibble)) & 0xf];
  }
  return id;
}

}  // namespace tessera::engine
