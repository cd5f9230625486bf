// `tessera export --to perfetto`: one simulated step as a Chrome trace (the JSON
// "Trace Event Format" that ui.perfetto.dev and chrome://tracing open).
//
// The plan is simulated again (simulate.h, events on) with the model the file
// names and the file's cluster, so the trace and the plan agree as long as the
// simulator has not changed since the file was written. Each pipeline stage has
// two lanes (threads of process 0): its compute (lane 2·stage: forward and
// backward passes, ZeRO-3 and tensor-parallel communication included) and its
// communication after the pipeline (lane 2·stage + 1: gradient reduction,
// offload, optimizer step). "X" events carry microseconds; "M" events name the
// process and the lanes and keep the lanes in stage order.
#include <charconv>

#include "export_internal.h"
#include "tessera/planner/export.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/search.h"

namespace tessera::planner {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string lane_name(int lane) {
  return "stage " + std::to_string(lane / 2) + (lane % 2 == 0 ? " compute" : " communication");
}

}  // namespace

Result<std::string> export_perfetto(const PlanFile& file, size_t plan_index) {
  if (Status s = export_detail::check_plan(file, plan_index); !s) return s.error();
  const EstimateRequest& r = file.plans[plan_index];
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  auto memory = estimate_memory(model.value(), file.cluster.gpu, r);
  if (!memory) return memory.error();
  auto simulation = simulate_step(model.value(), file.cluster, r, memory.value(), SimulationSettings{}, true);
  if (!simulation) return simulation.error();
  const StepSimulation& sim = simulation.value();
  const std::string description = describe_plan(r);

  ordered_json events = ordered_json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                    {"args", {{"name", "Tessera plan " + std::to_string(plan_index + 1) + ": " + description}}}});
  const int lanes = static_cast<int>(2 * r.layout.pp);
  for (int lane = 0; lane < lanes; ++lane) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", lane}, {"args", {{"name", lane_name(lane)}}}});
    events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", 1}, {"tid", lane}, {"args", {{"sort_index", lane}}}});
  }
  for (const TraceEvent& e : sim.events) {
    ordered_json args = {{"stage", e.lane / 2}};
    int64_t micro_batch = 0;
    const char* digits = e.name.data() + 1;
    if ((e.category == "forward" || e.category == "backward") && e.name.size() > 1 &&
        std::from_chars(digits, e.name.data() + e.name.size(), micro_batch).ec == std::errc()) {
      args["micro_batch"] = micro_batch;
    }
    events.push_back({{"name", e.name},
                      {"cat", e.category},
                      {"ph", "X"},
                      {"ts", e.start_s * 1e6},
                      {"dur", e.duration_s * 1e6},
                      {"pid", 1},
                      {"tid", e.lane},
                      {"args", args}});
  }
  const json& plan = export_detail::plan_json(file, plan_index);
  ordered_json other;
  other["generator"] = "Tessera 0.1.0 (tessera export --to perfetto)";
  other["plan"] = plan_index + 1;
  other["description"] = description;
  other["model"] = file.model_source;
  other["cluster"] = std::to_string(file.cluster.world_size()) + " × " + file.cluster.gpu.name + " (" + std::to_string(file.cluster.num_nodes) +
                     " × " + std::to_string(file.cluster.gpus_per_node) + ")";
  other["global_batch_size"] = file.global_batch_size;
  other["seq_len"] = file.seq_len;
  other["step_time_s"] = sim.step_time_s;
  other["tokens_per_s"] = sim.tokens_per_s;
  other["mfu"] = sim.mfu;
  other["step_breakdown"] = ordered_json(breakdown_to_json(sim.breakdown));
  if (plan.contains("step_time_s")) other["plan_file_step_time_s"] = plan["step_time_s"];
  ordered_json trace;
  trace["traceEvents"] = events;
  trace["displayTimeUnit"] = "ms";
  trace["otherData"] = other;
  return trace.dump(1) + "\n";
}

}  // namespace tessera::planner
