#include "tessera/planner/pipeline_stage_model.h"

#include <algorithm>
#include <vector>

#include "tessera/planner/pipeline_stages.h"

namespace tessera::planner {

TensorInventory stage_inventory(const TensorInventory& full, int64_t num_layers, const PipelinePlacement& placement) {
  if (placement.pp == 1) return full;
  const auto chunks = stage_chunks(static_cast<int>(num_layers), static_cast<int>(placement.pp), static_cast<int>(placement.chunks));
  const std::vector<StageLayers>& mine = chunks[static_cast<size_t>(placement.stage)];
  const auto holds = [&](const TensorInfo& t) {
    if (t.layer == kEmbeddingLayer) return placement.first();
    if (t.layer >= num_layers) return placement.last();
    return std::any_of(mine.begin(), mine.end(), [&](const StageLayers& c) { return t.layer >= c.first_layer && t.layer < c.first_layer + c.num_layers; });
  };
  TensorInventory stage;
  std::vector<int> new_index(full.tensors.size(), -1);
  int copy = -1;
  for (size_t i = 0; i < full.tensors.size(); ++i) {
    const TensorInfo& t = full.tensors[i];
    if (!holds(t)) continue;
    new_index[i] = static_cast<int>(stage.tensors.size());
    TensorInfo kept = t;
    if (t.tied_to >= 0) {
      const int source = new_index[static_cast<size_t>(t.tied_to)];
      if (source >= 0) {
        kept.tied_to = source;
      } else {  // the embedding lives on the first stage: this stage keeps a copy under its name
        const TensorInfo& embedding = full.tensors[static_cast<size_t>(t.tied_to)];
        kept.tied_to = -1;
        kept.tied_copy = true;
        kept.name = embedding.name;
        kept.shape = embedding.shape;
        kept.tp_split = embedding.tp_split;
        kept.tp_dim = embedding.tp_dim;
        kept.tp_parts = embedding.tp_parts;
        copy = new_index[i];
      }
    }
    stage.tensors.push_back(std::move(kept));
  }
  for (int i : full.module_order) {
    if (new_index[static_cast<size_t>(i)] >= 0) stage.module_order.push_back(new_index[static_cast<size_t>(i)]);
  }
  if (copy >= 0 && !full.module_order.empty()) stage.module_order.push_back(copy);  // an untied head comes last in torch's order
  return stage;
}

Model stage_model(const Model& full, const PipelinePlacement& placement) {
  if (placement.pp == 1) return full;
  return make_model(full.config, stage_inventory(full.inventory, full.config.num_layers, placement));
}

}  // namespace tessera::planner
