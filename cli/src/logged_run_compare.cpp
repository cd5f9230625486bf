#include "logged_run_compare.h"

#include <cstdio>
#include <ostream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "tessera/planner/training_log.h"
#include "tessera/planner/memory_comparison.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/report.h"

namespace tessera::cli {
namespace {

using nlohmann::json;
using namespace tessera::planner;

std::string pct(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f%%", value);
  return text;
}

// A measured figure and its error, or "-" for both where the runtime does not log it.
std::pair<std::string, std::string> measured_and_error(int64_t predicted, int64_t measured) {
  if (measured < 0) return {"-", "-"};
  return {format_bytes(measured), pct(error_pct(predicted, measured))};
}

json measured_json(int64_t measured) { return measured < 0 ? json(nullptr) : json(measured); }
json error_json(int64_t predicted, int64_t measured) { return measured < 0 ? json(nullptr) : json(error_pct(predicted, measured)); }

double seconds_error_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

json comparison_json(const LoggedRunComparison& c, size_t plan_index) {
  json ranks = json::array();
  for (const LoggedStageMemory& m : c.memory) {
    ranks.push_back(json{{"rank", m.rank},
                         {"pipeline_stage", m.stage},
                         {"predicted_max_allocated_bytes", m.predicted_allocated},
                         {"measured_max_allocated_bytes", measured_json(m.measured_max_allocated)},
                         {"max_allocated_error_pct", error_json(m.predicted_allocated, m.measured_max_allocated)},
                         {"predicted_max_reserved_bytes", m.predicted_reserved},
                         {"measured_max_reserved_bytes", measured_json(m.measured_max_reserved)},
                         {"max_reserved_error_pct", error_json(m.predicted_reserved, m.measured_max_reserved)}});
  }
  return json{{"schema", 1},
              {"kind", "logged_run_comparison"},
              {"runtime", logged_runtime_name(c.runtime)},
              {"plan", plan_index + 1},
              {"description", c.plan_description},
              {"step_time", {{"predicted_s", c.predicted_step_s},
                             {"measured_s", c.measured_step_s},
                             {"error_pct", seconds_error_pct(c.predicted_step_s, c.measured_step_s)},
                             {"logged_steps", c.steps_used},
                             {"first_left_out", c.first_step_left_out}}},
              {"tokens_per_s", {{"predicted", c.predicted_tokens_per_s},
                                {"measured", c.measured_tokens_per_s},
                                {"error_pct", seconds_error_pct(c.predicted_tokens_per_s, c.measured_tokens_per_s)}}},
              {"memory_after_steps", c.memory_after_steps},
              {"ranks", ranks}};
}


void print_table(const LoggedRunComparison& c, const CompareCliOptions& o, size_t plan_index, std::ostream& out) {
  char line[200];
  out << logged_runtime_name(c.runtime) << " run " << o.metrics << " against plan " << plan_index + 1 << " of " << o.plan << ":\n  " << c.plan_description << "\n\n";
  std::snprintf(line, sizeof line, "%-12s%14s%14s%11s\n", "", "predicted", "measured", "error");
  out << line;
  std::snprintf(line, sizeof line, "%-12s%12.3f s%12.3f s%11s   median of %lld logged step%s%s\n", "step time", c.predicted_step_s, c.measured_step_s,
                pct(seconds_error_pct(c.predicted_step_s, c.measured_step_s)).c_str(), static_cast<long long>(c.steps_used),
                c.steps_used == 1 ? "" : "s", c.first_step_left_out ? ", the first (warm-up) left out" : "");
  out << line;
  std::snprintf(line, sizeof line, "%-12s%14.0f%14.0f%11s\n", "tokens/s", c.predicted_tokens_per_s, c.measured_tokens_per_s,
                pct(seconds_error_pct(c.predicted_tokens_per_s, c.measured_tokens_per_s)).c_str());
  out << line;
  if (c.memory.empty()) {
    out << "\nno report_memory line in the log: Megatron prints one after the first logged interval on each rank of\n"
        << "data-parallel rank 0, in the output of that rank's node (give every node's output together)\n";
    return;
  }
  out << "\npeak memory after " << c.memory_after_steps << " steps, as PyTorch counts it (the planner's figure without the CUDA\n"
      << "context and NCCL's buffers, which PyTorch's counters do not see; for max allocated, without the allocator's reserve)\n";
  std::snprintf(line, sizeof line, "%6s%7s%14s%12s%11s%14s%12s%11s\n", "rank", "stage", "max alloc.", "measured", "error", "max reserved", "measured", "error");
  out << line;
  for (const LoggedStageMemory& m : c.memory) {
    const auto [allocated, allocated_error] = measured_and_error(m.predicted_allocated, m.measured_max_allocated);
    const auto [reserved, reserved_error] = measured_and_error(m.predicted_reserved, m.measured_max_reserved);
    std::snprintf(line, sizeof line, "%6lld%7lld%14s%12s%11s%14s%12s%11s\n", static_cast<long long>(m.rank), static_cast<long long>(m.stage),
                  format_bytes(m.predicted_allocated).c_str(), allocated.c_str(), allocated_error.c_str(), format_bytes(m.predicted_reserved).c_str(),
                  reserved.c_str(), reserved_error.c_str());
    out << line;
  }
}

}  // namespace

int run_logged_run_compare(const CompareCliOptions& o, const std::string& log_text, std::ostream& out, std::ostream& err) {
  auto log = parse_training_log(log_text, o.metrics);
  if (!log) return fail(err, log.error().message);
  auto file = read_plan_file(o.plan);
  if (!file) return fail(err, file.error().message + " (a run's log is compared with the plan.json it was exported from)");
  const size_t index = static_cast<size_t>(o.plan_number - 1);
  auto comparison = compare_logged_run(file.value(), index, log.value(), o.metrics);
  if (!comparison) return fail(err, comparison.error().message);
  if (o.format == "json") {
    out << comparison_json(comparison.value(), index).dump(2) << "\n";
  } else {
    print_table(comparison.value(), o, index, out);
  }
  return kExitOk;
}

}  // namespace tessera::cli
