// The estimate as JSON, schema 1. Byte counts are integers; names match the
// memory categories and the option spellings of the command line.
#include "report_facts.h"

#include <algorithm>

#include "tessera/planner/flops.h"
#include "tessera/planner/json_io.h"

namespace tessera::planner {

nlohmann::json estimate_to_json(const EstimateReport& r) {
  using nlohmann::json;
  const auto& t = r.request.training;
  const FlopsPerToken flops = flops_per_token(r.model, r.request);
  json out{{"schema", 1}, {"kind", "estimate"}, {"model", model_to_json(r.model)}};
  out["gpu"] = json{{"name", r.gpu.name}, {"display_name", r.gpu.display_name}, {"memory_bytes", r.gpu.memory_bytes}};
  out.update(request_to_json(r.request));
  out["assumptions"]["cuda_context_bytes"] = r.estimate.cuda_context_bytes;  // the figure used, after the GPU profile's default
  out["flops_per_token"] = json{{"forward", flops.forward}, {"backward", flops.backward}, {"recompute", flops.recompute}};
  out["model_states"] = json{{"runtime", enum_name(r.request.plugin.runtime)}, {"source", model_states_source(r.request.plugin, t.precision)}};
  out["ranks"] = ranks_to_json(r.estimate);
  out["fits"] = r.estimate.fits();
  out["verdict"] = verdict_line(r.estimate);
  if (r.estimate.gemini) {
    const GeminiSummary& g = *r.estimate.gemini;
    const double padded = static_cast<double>(g.padded_elements());
    json occupancy = json::array(), capacities = json::array();
    for (size_t c = 0; c < g.chunk_used.size(); ++c) {
      occupancy.push_back(static_cast<double>(g.chunk_used[c]) / static_cast<double>(g.chunk_capacity[c]));
      if (g.chunk_capacity[c] != g.chunk_size) capacities.push_back(json{{"chunk", c}, {"elements", g.chunk_capacity[c]}});
    }
    const int64_t param_bytes = compute_bytes(t.precision);
    out["gemini"] = json{{"chunk_size", g.chunk_size},
                         {"num_chunks", g.num_chunks},
                         {"own_chunks", capacities},  // tensors larger than chunk_size, each in a chunk of its own
                         {"chunk_occupancy", occupancy},
                         {"waste_elements", g.waste_elements},
                         {"waste_percent", 100.0 * static_cast<double>(g.waste_elements) / padded},
                         {"shard_elements_per_rank", g.padded_elements() / r.request.layout.shard_ranks()},
                         {"shard_param_bytes_per_rank", g.padded_elements() / r.request.layout.shard_ranks() * param_bytes},
                         {"peak_gathered_chunks_forward", g.peak_gathered_chunks},
                         {"peak_chunks_backward", 2 * g.peak_gathered_chunks},  // parameter + gradient chunk each
                         {"parameter_chunks_on_host", std::count(g.parameters_on_host.begin(), g.parameters_on_host.end(), true)},
                         {"chunks_gathered_into_backward", std::ranges::count(gathered_after_forward(g.chunk_set()), true)},
                         {"kept_gathered_elements", g.kept_gathered_elements},
                         {"shard_param_frac", g.shard_param_frac},
                         {"offload_optim_frac", g.offload_optim_frac},
                         {"offload_param_frac", g.offload_param_frac},
                         {"optimizer_chunks_on_host", g.optimizer_chunks_on_host},  // static: what ColossalAI's walk sends
                         {"pcie_bytes_per_step", json{{"up", g.step.host_up_bytes}, {"down", g.step.host_down_bytes}}},  // per rank
                         {"chunk_tensors", g.chunk_tensors}};
  }
  return out;
}

}  // namespace tessera::planner
