#include "tessera/planner/measured_run.h"

#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "tessera/planner/cluster.h"
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

// `value` as a whole number in [0, max]; none for a float, a negative, a string or a larger number.
std::optional<int64_t> whole_number(const json& value, int64_t max) {
  // Text parses non-negative integers as unsigned, negative ones as integer, the rest as float.
  const bool whole = value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0);
  if (!whole || value.get<uint64_t>() > static_cast<uint64_t>(max)) return std::nullopt;
  return value.get<int64_t>();
}

// `entry[key]` as a byte count: absent is 0; else a whole number in [0, kMaxCategoryBytes].
Result<int64_t> byte_count(const json& entry, const char* key, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end()) return int64_t{0};
  const std::optional<int64_t> bytes = whole_number(*it, kMaxCategoryBytes);
  if (!bytes) {
    return make_error(ErrorCode::parse_error, where + " " + key + " must be a whole number of bytes from 0 to 2^50 (1 PiB), got " +
                                                  one_line(it->dump(), 40));
  }
  return *bytes;
}

// [first, last] with 0 <= first <= last < kMaxGpus (the most GPUs a plan may have).
std::optional<std::pair<int64_t, int64_t>> rank_range(const json& range) {
  if (!range.is_array() || range.size() != 2) return std::nullopt;
  const std::optional<int64_t> first = whole_number(range[0], kMaxGpus - 1);
  const std::optional<int64_t> last = whole_number(range[1], kMaxGpus - 1);
  if (!first || !last || *first > *last) return std::nullopt;
  return std::pair{*first, *last};
}

// A row's "categories" as {"<category>": {"device_bytes", "host_bytes"}}; a category left out holds nothing.
Result<MemoryBreakdown> row_categories(const json& categories, const std::string& where_row) {
  MemoryBreakdown memory;
  for (MemoryCategory c : kAllMemoryCategories) {
    const auto entry = categories.find(std::string(to_string(c)));
    if (entry == categories.end()) continue;
    const std::string where = where_row + " category '" + std::string(to_string(c)) + "'";
    if (!entry->is_object()) return make_error(ErrorCode::parse_error, where + " must be an object with device_bytes and host_bytes");
    for (auto [key, space] : {std::pair{"device_bytes", MemorySpace::device}, std::pair{"host_bytes", MemorySpace::host}}) {
      auto bytes = byte_count(*entry, key, where);
      if (!bytes) return bytes.error();
      memory.add(c, space, bytes.value());
    }
  }
  return memory;
}

// The rows of a "ranks" array, each {"ranks": [first, last], "categories": {...}}.
// Rows must come in rank order without overlap, as the planner and the engine
// write them; a row without "ranks" (files older than the per-rank rows) holds
// the one rank after the previous row's.
Result<std::vector<RankRow>> parse_rank_rows(const json* ranks, const std::string& source, const std::string& missing) {
  if (ranks == nullptr || !ranks->is_array() || ranks->empty()) return make_error(ErrorCode::parse_error, source + ": " + missing);
  std::vector<RankRow> rows;
  int64_t next_rank = 0;
  for (size_t i = 0; i < ranks->size(); ++i) {
    const json& row = (*ranks)[i];
    const std::string where = source + ": \"ranks\"[" + std::to_string(i) + "]";
    if (!row.is_object() || !row.contains("categories") || !row["categories"].is_object()) {
      return make_error(ErrorCode::parse_error, where + " must be an object with \"categories\"");
    }
    RankRow parsed{next_rank, next_rank, {}};
    if (row.contains("ranks")) {
      const auto range = rank_range(row["ranks"]);
      if (!range) {
        return make_error(ErrorCode::parse_error, where + " \"ranks\" must be [first, last] with 0 <= first <= last < " + std::to_string(kMaxGpus) + ", got " +
                                                      one_line(row["ranks"].dump(), 40));
      }
      std::tie(parsed.first_rank, parsed.last_rank) = *range;
      if (parsed.first_rank < next_rank) {
        return make_error(ErrorCode::parse_error, where + " starts at rank " + std::to_string(parsed.first_rank) + ", which an earlier row covers" +
                                                      "; rows must be in rank order without overlap");
      }
    }
    auto memory = row_categories(row["categories"], where);
    if (!memory) return memory.error();
    parsed.memory = memory.value();
    next_rank = parsed.last_rank + 1;
    rows.push_back(std::move(parsed));
  }
  return rows;
}

}  // namespace

namespace {

// A per-step series of metrics.json: numbers, null for a step without one (NaN here); none when absent.
Result<std::vector<double>> per_step(const json& doc, const char* key, const std::string& source) {
  std::vector<double> values;
  const auto found = doc.find(key);
  if (found == doc.end()) return values;
  if (!found->is_array()) return make_error(ErrorCode::parse_error, source + ": \"" + key + "\" must be an array of numbers, one per step");
  for (const json& value : *found) {
    if (!value.is_number() && !value.is_null()) return make_error(ErrorCode::parse_error, source + ": \"" + key + "\" holds something other than numbers");
    values.push_back(value.is_null() ? std::numeric_limits<double>::quiet_NaN() : value.get<double>());
  }
  return values;
}

}  // namespace

Result<MeasuredRun> parse_measured_run(std::string_view text, const std::string& source) {
  auto document = parse_json(text, source);
  if (!document) return document.error();
  const json& doc = document.value();
  if (!doc.is_object() || value_or(doc, "schema", 0) != 1 || value_or(doc, "kind", std::string()) != "metrics") {
    return make_error(ErrorCode::parse_error, source + ": not a metrics file (expected \"schema\": 1, \"kind\": \"metrics\" as tessera train writes)");
  }
  auto rows = parse_rank_rows(doc.contains("ranks") ? &doc["ranks"] : nullptr, source, "no per-rank memory (\"ranks\"[0].\"categories\")");
  if (!rows) return rows.error();
  // The engine measures each rank on its own; a range would claim measurements nobody made.
  for (const RankRow& row : rows.value()) {
    if (row.first_rank != row.last_rank) {
      return make_error(ErrorCode::parse_error, source + ": a row covers ranks " + std::to_string(row.first_rank) + "-" +
                                                    std::to_string(row.last_rank) + "; a metrics file has one row per rank");
    }
  }
  auto request = request_from_json(doc, source);
  if (!request) return request.error();
  MeasuredRun run;
  run.request = std::move(request).value();
  run.model_name = doc.contains("model") ? value_or(doc["model"], "name", std::string()) : "";
  run.parameter_count = doc.contains("model") ? value_or(doc["model"], "parameter_count", int64_t{0}) : 0;
  run.tokens_per_s = value_or(doc, "tokens_per_s", 0.0);
  run.device = value_or(doc, "device", std::string());
  for (auto [key, series] : {std::pair{"loss", &run.loss}, std::pair{"grad_norm", &run.grad_norm}, std::pair{"step_time_s", &run.step_time_s}}) {
    auto values = per_step(doc, key, source);
    if (!values) return values.error();
    *series = std::move(values).value();
  }
  run.ranks = std::move(rows).value();
  return run;
}

Result<MeasuredRun> read_measured_run(const std::string& path) {
  auto text = read_text_file(path, "metrics", kMaxJsonFileBytes);
  if (!text) return text.error();
  return parse_measured_run(text.value(), path);
}

Result<PredictedRun> read_predicted_run(const std::string& path, size_t plan_index) {
  auto text = read_text_file(path, "plan", kMaxJsonFileBytes);
  if (!text) return text.error();
  auto document = parse_json(text.value(), "plan: " + path);
  if (!document) return document.error();
  const json& doc = document.value();
  const json* ranks = nullptr;
  if (doc.is_object() && doc.contains("ranks")) ranks = &doc["ranks"];
  const bool plan_file = value_or(doc, "kind", std::string()) == "plan" && doc.contains("plans") && doc["plans"].is_array();
  if (!plan_file && plan_index > 0) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(plan_index + 1) + ": " + path + " is an estimate, one plan; drop --plan");
  }
  if (plan_file && plan_index >= doc["plans"].size()) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(plan_index + 1) + " is out of range: " + path + " holds plans 1 to " +
                                                       std::to_string(doc["plans"].size()));
  }
  if (plan_file && doc["plans"][plan_index].is_object() && doc["plans"][plan_index].contains("memory") && doc["plans"][plan_index]["memory"].is_object()) {
    const json& memory = doc["plans"][plan_index]["memory"];
    ranks = memory.contains("ranks") ? &memory["ranks"] : nullptr;
  }
  auto rows = parse_rank_rows(ranks, path, "no per-rank memory found (expected a plan or estimate file with \"schema\": 1)");
  if (!rows) return rows.error();
  PredictedRun run;
  run.ranks = std::move(rows).value();
  run.model_name = doc.contains("model") ? value_or(doc["model"], "name", std::string()) : "";
  run.parameter_count = doc.contains("model") ? value_or(doc["model"], "parameter_count", int64_t{0}) : 0;
  return run;
}

}  // namespace tessera::planner
