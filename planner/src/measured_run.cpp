#include "tessera/planner/measured_run.h"

#include "tessera/planner/json_io.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {

using nlohmann::json;

namespace {

// The most bytes one category may report: 2^50 (1 PiB), about 7,500 times the
// largest shipped GPU (h200-141g, 150,754,820,096 bytes) and 1,024 times a
// node's default host memory (cluster.h), so only a typo or a corrupt file goes
// beyond it. Ten such categories still sum exactly in int64, and the difference
// of two is exact in double (below 2^53) when the error is computed.
constexpr int64_t kMaxCategoryBytes = int64_t{1} << 50;

// `entry[key]` as a byte count: absent is 0; else a whole number in [0, kMaxCategoryBytes].
Result<int64_t> byte_count(const json& entry, const char* key, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end()) return int64_t{0};
  // Text parses non-negative integers as unsigned, negative ones as integer, the rest as float.
  const bool whole = it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0);
  if (!whole || it->get<uint64_t>() > static_cast<uint64_t>(kMaxCategoryBytes)) {
    return make_error(ErrorCode::parse_error, where + " " + key + " must be a whole number of bytes from 0 to 2^50 (1 PiB), got " +
                                                  one_line(it->dump(), 40));
  }
  return it->get<int64_t>();
}

// The first row of a "ranks" array: its "categories" as {"<category>": {"device_bytes", "host_bytes"}}.
Result<MemoryBreakdown> first_rank_categories(const json* ranks, const std::string& source, const std::string& missing) {
  if (ranks == nullptr || !ranks->is_array() || ranks->empty() || !(*ranks)[0].is_object() || !(*ranks)[0].contains("categories") ||
      !(*ranks)[0]["categories"].is_object()) {
    return make_error(ErrorCode::parse_error, source + ": " + missing);
  }
  MemoryBreakdown memory;
  const json& categories = (*ranks)[0]["categories"];
  for (MemoryCategory c : kAllMemoryCategories) {
    const auto entry = categories.find(std::string(to_string(c)));
    if (entry == categories.end()) continue;
    const std::string where = source + ": category '" + std::string(to_string(c)) + "'";
    if (!entry->is_object()) return make_error(ErrorCode::parse_error, where + " must be an object with device_bytes and host_bytes");
    for (auto [key, space] : {std::pair{"device_bytes", MemorySpace::device}, std::pair{"host_bytes", MemorySpace::host}}) {
      auto bytes = byte_count(*entry, key, where);
      if (!bytes) return bytes.error();
      memory.add(c, space, bytes.value());
    }
  }
  return memory;
}

}  // namespace

Result<MeasuredRun> parse_measured_run(std::string_view text, const std::string& source) {
  auto document = parse_json(text, source);
  if (!document) return document.error();
  const json& doc = document.value();
  if (!doc.is_object() || value_or(doc, "schema", 0) != 1 || value_or(doc, "kind", std::string()) != "metrics") {
    return make_error(ErrorCode::parse_error, source + ": not a metrics file (expected \"schema\": 1, \"kind\": \"metrics\" as tessera train writes)");
  }
  auto memory = first_rank_categories(doc.contains("ranks") ? &doc["ranks"] : nullptr, source, "no per-rank memory (\"ranks\"[0].\"categories\")");
  if (!memory) return memory.error();
  auto request = request_from_json(doc, source);
  if (!request) return request.error();
  MeasuredRun run;
  run.request = std::move(request).value();
  run.model_name = doc.contains("model") ? value_or(doc["model"], "name", std::string()) : "";
  run.tokens_per_s = value_or(doc, "tokens_per_s", 0.0);
  run.memory = memory.value();
  return run;
}

Result<MeasuredRun> read_measured_run(const std::string& path) {
  auto text = read_text_file(path, "metrics", kMaxJsonFileBytes);
  if (!text) return text.error();
  return parse_measured_run(text.value(), path);
}

Result<PredictedRun> read_predicted_run(const std::string& path) {
  auto text = read_text_file(path, "plan", kMaxJsonFileBytes);
  if (!text) return text.error();
  auto document = parse_json(text.value(), "plan: " + path);
  if (!document) return document.error();
  const json& doc = document.value();
  const json* ranks = nullptr;
  if (doc.is_object() && doc.contains("ranks")) ranks = &doc["ranks"];
  if (value_or(doc, "kind", std::string()) == "plan" && doc.contains("plans") && doc["plans"].is_array() && !doc["plans"].empty() &&
      doc["plans"][0].is_object() && doc["plans"][0].contains("memory") && doc["plans"][0]["memory"].is_object()) {
    ranks = doc["plans"][0]["memory"].contains("ranks") ? &doc["plans"][0]["memory"]["ranks"] : nullptr;
  }
  auto memory = first_rank_categories(ranks, path, "no per-rank memory found (expected a plan or estimate file with \"schema\": 1)");
  if (!memory) return memory.error();
  PredictedRun run;
  run.memory = memory.value();
  run.model_name = doc.contains("model") ? value_or(doc["model"], "name", std::string()) : "";
  return run;
}

std::vector<CategoryError> compare_memory(const MemoryBreakdown& predicted, const MemoryBreakdown& measured) {
  std::vector<CategoryError> out;
  for (MemoryCategory c : kAllMemoryCategories) {
    const int64_t p = predicted[c].device;
    const int64_t m = measured[c].device;
    const double error = m == 0 ? (p == 0 ? 0.0 : 100.0) : 100.0 * static_cast<double>(p - m) / static_cast<double>(m);
    out.push_back(CategoryError{c, p, m, error});
  }
  return out;
}

}  // namespace tessera::planner
