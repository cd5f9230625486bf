#include "tessera/engine/flat_checkpoint.h"

#include <utility>

#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {

FlatAdamWState::FlatAdamWState(const planner::Model& model)
    : FlatAdamWState(planner::OptimizerLayout{planner::shard_pieces(planner::flat_parameter_order(model.inventory), 1, 0), model.parameter_count}) {}

FlatAdamWState::FlatAdamWState(planner::OptimizerLayout layout)
    : pieces_(std::move(layout.pieces)),
      weights_(static_cast<size_t>(layout.shard_numel)),
      exp_avg_(weights_.size()),
      exp_avg_sq_(weights_.size()) {}

Result<std::vector<CheckpointFile>> write_flat_checkpoint_files(const std::string& directory, const planner::Model& model, FlatAdamWState& state,
                                                                const TrainingPosition& position) {
  return write_consolidated_checkpoint_files(directory, model, state.weights(), {state.state(0), state.state(1)}, state, planner::OptimizerKind::adamw,
                                             position);
}

Result<TrainingPosition> load_flat_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& model, FlatAdamWState& state,
                                              TensorParallelRank tp) {
  const planner::TensorInventory part = planner::tp_rank_inventory(model.inventory, tp.size);
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(part)) {
    const planner::TensorInfo& tensor = part.tensors[static_cast<size_t>(flat.tensor_index)];
    names.push_back(tensor.name);
    shapes.push_back(tensor.shape);
  }
  return load_checkpoint(checkpoint, model, ParameterNames{names, shapes}, state, planner::OptimizerKind::adamw, tp);
}

}  // namespace tessera::engine
