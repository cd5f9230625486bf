#include "tessera/planner/registry.h"

#include <filesystem>

#include "tessera/planner/embedded_data.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

std::vector<std::string> names_of(const std::vector<EmbeddedFile>& files) {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : files) names.emplace_back(f.name);
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

const EmbeddedFile* find_embedded(const std::vector<EmbeddedFile>& files, const std::string& name) {
  for (const EmbeddedFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// A path if it exists on disk or looks like one; otherwise a registry name.
bool looks_like_path(const std::string& text) {
  std::error_code ec;
  return text.find('/') != std::string::npos || text.ends_with(".json") || std::filesystem::exists(text, ec);
}

}  // namespace

std::vector<std::string> shipped_model_names() { return names_of(embedded_model_files()); }
std::vector<std::string> shipped_gpu_names() { return names_of(embedded_gpu_files()); }
std::vector<std::string> shipped_cluster_names() { return names_of(embedded_cluster_files()); }

Result<Model> load_model(const std::string& name_or_path, const std::string& field) {
  if (name_or_path.empty()) return make_error(ErrorCode::invalid_argument, field + " is empty; give a model name (see `tessera models`) or a config.json path");
  if (const EmbeddedFile* file = find_embedded(embedded_model_files(), name_or_path)) {
    auto config = parse_model_config(file->content, "models/" + name_or_path + ".json");
    if (!config) return config.error();
    ModelConfig c = std::move(config).value();
    c.name = name_or_path;
    return make_model(std::move(c));
  }
  if (!looks_like_path(name_or_path)) {
    return make_error(ErrorCode::not_found, field + ": '" + one_line(name_or_path, 80) +
                                                "' is neither a file nor a shipped model; shipped: " + joined(shipped_model_names()));
  }
  auto config = load_model_config_file(name_or_path, field);
  if (!config) return config.error();
  return make_model(std::move(config).value());
}

Result<std::string> model_config_text(const std::string& name_or_path, const std::string& field) {
  if (const EmbeddedFile* file = find_embedded(embedded_model_files(), name_or_path)) return std::string(file->content);
  if (!looks_like_path(name_or_path)) {
    return make_error(ErrorCode::not_found, field + ": '" + one_line(name_or_path, 80) +
                                                "' is neither a file nor a shipped model; shipped: " + joined(shipped_model_names()));
  }
  return read_text_file(name_or_path, field, kMaxJsonFileBytes);
}

namespace {

// A shipped profile by name, or a profile file by path, read with `parse`;
// `kind` ("GPU", "cluster") and `folder` name it in messages.
template <typename T, typename Parse>
Result<T> load_profile(const std::vector<EmbeddedFile>& shipped, const std::string& name_or_path, const std::string& field,
                       const char* kind, const char* folder, Parse parse) {
  if (const EmbeddedFile* file = find_embedded(shipped, name_or_path)) {
    return parse(file->content, std::string(folder) + name_or_path + ".json");
  }
  if (!looks_like_path(name_or_path)) {
    return make_error(ErrorCode::not_found, field + ": '" + one_line(name_or_path, 80) + "' is not a known " + kind + "; known: " +
                                                joined(names_of(shipped)) + " (or the path of a " + kind + " .json)");
  }
  auto text = read_text_file(name_or_path, field, kMaxJsonFileBytes);
  if (!text) return text.error();
  Result<T> loaded = parse(text.value(), name_or_path);
  if (!loaded) return make_error(loaded.error().code, field + ": " + loaded.error().message);
  return loaded;
}

}  // namespace

Result<GpuProfile> load_gpu(const std::string& name_or_path, const std::string& field) {
  return load_profile<GpuProfile>(embedded_gpu_files(), name_or_path, field, "GPU", "data/hardware/gpus/",
                                  [](std::string_view text, const std::string& source) { return parse_gpu_profile(text, source); });
}

Result<ClusterSpec> load_cluster(const std::string& name_or_path, const std::string& field) {
  return load_profile<ClusterSpec>(embedded_cluster_files(), name_or_path, field, "cluster", "data/hardware/clusters/",
                                   [](std::string_view text, const std::string& source) { return parse_cluster(text, source); });
}

}  // namespace tessera::planner
