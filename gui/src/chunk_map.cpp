#include "chunk_map.h"

#include "tessera/planner/chunks.h"
#include "tessera/planner/search.h"

namespace tessera::gui {

ChunkMap make_chunk_map(const planner::Model& model, const ShownPlan& plan) {
  const planner::EstimateRequest& r = plan.request;
  ChunkMap map;
  map.plan_description = planner::describe_plan(r);
  map.plan_uses_chunks = plan.memory.gemini.has_value();
  map.dp = r.layout.dp;
  map.bytes_per_element = planner::compute_bytes(r.training.precision);
  planner::GeminiSummary summary;
  if (plan.memory.gemini) {
    summary = *plan.memory.gemini;
    map.placement = std::string(enum_name(r.plugin.gemini.placement_policy));
  } else {
    summary.chunk_size = planner::search_chunk_size(model.inventory, planner::GeminiOptions{}, map.dp);
    const planner::ChunkLayout searched = planner::pack_chunks(model.inventory, summary.chunk_size, map.dp);
    summary.chunk_used = searched.chunk_used;
    summary.chunk_capacity = searched.chunk_capacity;
    map.placement = "not used by this plan";
  }
  const planner::ChunkLayout layout = planner::pack_chunks(model.inventory, summary.chunk_size, map.dp);
  map.chunk_size = summary.chunk_size;
  map.waste_elements = layout.waste_elements();
  map.chunks = planner::gemini_chunk_placement(summary, map.dp);
  map.tensors.resize(map.chunks.size());
  for (size_t i = 0; i < layout.tensor_chunk.size(); ++i) {
    const int chunk = layout.tensor_chunk[i];
    if (chunk >= 0) map.tensors[static_cast<size_t>(chunk)].push_back(model.inventory.tensors[i].name);
  }
  return map;
}

}  // namespace tessera::gui
