#include "tessera/engine/consolidated_checkpoint.h"

#include "tessera/engine/parallel/rank_reports.h"

namespace tessera::engine {

Result<std::vector<CheckpointFile>> write_consolidated_checkpoint(const ConsolidationGroups& groups, OptimizerShard& optimizer, const planner::Model& part,
                                                                  const planner::Model& whole, const planner::PluginOptions& plugin,
                                                                  planner::OptimizerKind kind, const std::string& directory,
                                                                  const TrainingPosition& position) {
  const bool holds_part = groups.data.rank() == 0, holds_whole = groups.world.rank() == 0;
  const auto states = static_cast<int>(planner::optimizer_state_count(kind));
  std::vector<std::vector<float>> gathered(static_cast<size_t>(states + 1));
  std::vector<float> values_of_part;
  for (int v = 0; v <= states; ++v) {  // the weights, then each state
    const float* mine = v == 0 ? optimizer.weights() : optimizer.state(v - 1);
    values_of_part.assign(holds_part ? static_cast<size_t>(part.parameter_count) : 0, 0.0f);
    if (Status s = gather_shard_values(groups.data, optimizer, mine, part, plugin, holds_part ? values_of_part.data() : nullptr); !s) return s.error();
    if (!holds_part) continue;  // the tensor-parallel groups of data-parallel rank 0 gather on
    std::vector<float>& values = gathered[static_cast<size_t>(v)];
    values.assign(holds_whole ? static_cast<size_t>(whole.parameter_count) : 0, 0.0f);
    if (Status s = gather_tensor_parallel_parts(groups.tensor, values_of_part.data(), whole, holds_whole ? values.data() : nullptr); !s) return s.error();
  }
  if (!holds_whole) return std::vector<CheckpointFile>{};
  std::vector<const float*> state_values;
  for (int v = 1; v <= states; ++v) state_values.push_back(gathered[static_cast<size_t>(v)].data());
  return write_consolidated_checkpoint_files(directory, whole, gathered[0].data(), state_values, optimizer, kind, position);
}

}  // namespace tessera::engine
