#include "compare_command.h"

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "logged_run_compare.h"
#include "tessera/planner/text_util.h"
#include "tessera/planner/training_log.h"
#include "tessera/planner/measured_run.h"
#include "tessera/planner/report.h"

namespace tessera::cli {
namespace {

using nlohmann::json;
using namespace tessera::planner;


// The device figures: the keys the comparison had before it was per rank.
json device_row_json(const CategoryError& e) {
  return json{{"category", std::string(to_string(e.category))},
              {"predicted_bytes", e.predicted_bytes},
              {"measured_bytes", e.measured_bytes},
              {"error_pct", e.error_pct}};
}

json comparison_json(const std::vector<RankComparison>& ranks) {
  // "categories" stays the first measured rank's device rows, for readers of the one-rank format.
  json first_rank = json::array();
  for (const CategoryError& e : ranks.front().categories) first_rank.push_back(device_row_json(e));
  json per_rank = json::array();
  for (const RankComparison& rank : ranks) {
    json categories = json::array();
    for (const CategoryError& e : rank.categories) {
      json row = device_row_json(e);
      row["predicted_host_bytes"] = e.predicted_host_bytes;
      row["measured_host_bytes"] = e.measured_host_bytes;
      row["host_error_pct"] = e.host_error_pct;
      categories.push_back(std::move(row));
    }
    per_rank.push_back(json{{"rank", rank.rank}, {"categories", categories}});
  }
  return json{{"schema", 1}, {"kind", "comparison"}, {"categories", first_rank}, {"ranks", per_rank}, {"max_abs_error_pct", max_abs_error_pct(ranks)}};
}

bool any_host_bytes(const std::vector<RankComparison>& ranks) {
  for (const RankComparison& rank : ranks) {
    for (const CategoryError& e : rank.categories) {
      if (e.predicted_host_bytes != 0 || e.measured_host_bytes != 0) return true;
    }
  }
  return false;
}

bool all_ranks_agree(const std::vector<RankComparison>& ranks) {
  for (const RankComparison& rank : ranks) {
    if (rank.categories != ranks.front().categories) return false;
  }
  return true;
}

// "rank 2", "ranks 0-3", "ranks 0-1, 3": the measured ranks, runs of consecutive ones joined.
std::string ranks_label(const std::vector<RankComparison>& ranks) {
  if (ranks.size() == 1) return "rank " + std::to_string(ranks.front().rank);
  std::string label = "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i;
    while (end + 1 < ranks.size() && ranks[end + 1].rank == ranks[end].rank + 1) ++end;
    label += (i > 0 ? ", " : "") + std::to_string(ranks[i].rank) + (end > i ? "-" + std::to_string(ranks[end].rank) : "");
    i = end + 1;
  }
  return label;
}

std::string pct_text(double pct) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", pct);
  return text;
}

// One block: a header line naming the ranks, then one line per category; at most 94 columns with the host columns.
void print_block(const std::string& label, const std::vector<CategoryError>& rows, bool host, std::ostream& out) {
  char line[200];
  out << label << "\n";
  std::snprintf(line, sizeof line, "%-18s%12s%12s%9s", "category", "predicted", "measured", "error");
  out << line;
  if (host) {
    std::snprintf(line, sizeof line, "%16s%15s%12s", "host predicted", "host measured", "host error");
    out << line;
  }
  out << "\n";
  for (const CategoryError& e : rows) {
    std::snprintf(line, sizeof line, "%-18s%12s%12s%9s", std::string(to_string(e.category)).c_str(), format_bytes(e.predicted_bytes).c_str(),
                  format_bytes(e.measured_bytes).c_str(), pct_text(e.error_pct).c_str());
    out << line;
    if (host) {
      std::snprintf(line, sizeof line, "%16s%15s%12s", format_bytes(e.predicted_host_bytes).c_str(), format_bytes(e.measured_host_bytes).c_str(),
                    pct_text(e.host_error_pct).c_str());
      out << line;
    }
    out << "\n";
  }
}

// One table when every rank has the same figures (DDP), else one block per rank.
void print_tables(const std::vector<RankComparison>& ranks, std::ostream& out) {
  const bool host = any_host_bytes(ranks);
  if (all_ranks_agree(ranks)) return print_block(ranks_label(ranks), ranks.front().categories, host, out);
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out << "\n";
    print_block("rank " + std::to_string(ranks[i].rank), ranks[i].categories, host, out);
  }
}

}  // namespace

void add_compare_options(CLI::App& c, CompareCliOptions& o) {
  c.add_option("plan", o.plan, "plan.json or an estimate JSON")->required();
  // Not required of CLI11: run_compare names both files when it is missing.
  c.add_option("metrics", o.metrics, "metrics.json written by tessera train, or the output of a Megatron-LM, DeepSpeed or torchtitan run (tessera export --to megatron, --to deepspeed, --to torchtitan)");
  c.add_option("--plan", o.plan_number, "Which plan of a plan file: 1 is the best")->capture_default_str();
  c.add_option("--format", o.format, "table or json")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
}

int run_compare(const CompareCliOptions& o, std::ostream& out, std::ostream& err) {
  if (o.metrics.empty()) {
    std::error_code ec;
    const std::string dir = std::filesystem::is_directory(o.plan, ec) ? o.plan : std::string("run");
    return fail(err, "compare takes the plan and what the run measured, two files: tessera compare " + dir + "/plan.json " + dir + "/metrics.json");
  }
  if (o.plan_number < 1) return fail(err, "--plan must be a positive integer (1 is the best plan), got " + std::to_string(o.plan_number));
  auto text = read_text_file(o.metrics, "metrics", kMaxTrainingLogBytes);
  if (!text) return fail(err, text.error().message);
  // metrics.json is a JSON object; anything else is read as a training log (training_log.h), which says what it lacks.
  const size_t first = text->find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (*text)[first] != '{') return run_logged_run_compare(o, text.value(), out, err);
  auto predicted = read_predicted_run(o.plan, static_cast<size_t>(o.plan_number - 1));
  if (!predicted) return fail(err, predicted.error().message);
  auto measured = parse_measured_run(text.value(), o.metrics);
  if (!measured) return fail(err, measured.error().message);
  if (predicted->parameter_count > 0 && measured->parameter_count > 0 && predicted->parameter_count != measured->parameter_count) {
    return fail(err, o.plan + " is for " + predicted->model_name + " (" + format_count(predicted->parameter_count) + " parameters) but " + o.metrics +
                         " measured " + measured->model_name + " (" + format_count(measured->parameter_count) +
                         " parameters): compare a run with the plan of its own model (the run's own plan.json)");
  }
  // Two names for one size of model (a config.json under another name): compared, with a note.
  if (!predicted->model_name.empty() && !measured->model_name.empty() && predicted->model_name != measured->model_name) {
    err << "tessera: note: " << o.plan << " is for " << predicted->model_name << " but " << o.metrics << " measured " << measured->model_name
        << ", a model of as many parameters; the errors below compare the two\n";
  }
  auto ranks = compare_memory(predicted->ranks, o.plan, measured->ranks, o.metrics);
  if (!ranks) return fail(err, ranks.error().message);
  if (o.format == "json") {
    out << comparison_json(ranks.value()).dump(2) << "\n";
  } else {
    print_tables(ranks.value(), out);
  }
  return kExitOk;
}

}  // namespace tessera::cli
