#include "tessera/engine/consolidated_checkpoint.h"

#include <algorithm>
#include <map>

#include "tessera/planner/pipeline_stage_model.h"

#include "tessera/engine/parallel/rank_reports.h"

namespace tessera::engine {
namespace {

// Pipeline rank 0: every stage's values (flat order of its stage model) put
// where the whole model keeps them, by name; a tied embedding's copy is the
// embedding itself. Other stages send theirs.
Status gather_stages(comm::Communicator& pipeline, int64_t model_chunks, const std::vector<float>& mine, const planner::Model& whole, float* out) {
  if (pipeline.rank() != 0) return pipeline.send(mine.data(), mine.size(), 0);
  std::map<std::string, int64_t> offset_of;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(whole.inventory)) {
    offset_of[whole.inventory.tensors[static_cast<size_t>(flat.tensor_index)].name] = flat.offset;
  }
  std::vector<float> received;
  for (int s = 0; s < pipeline.size(); ++s) {
    const planner::Model other = planner::stage_model(whole, {pipeline.size(), s, model_chunks});
    const std::vector<float>* values = &mine;
    if (s > 0) {
      received.assign(static_cast<size_t>(other.parameter_count), 0.0f);
      if (Status status = pipeline.recv(received.data(), received.size(), s); !status) return status;
      values = &received;
    }
    for (const planner::FlatParameter& flat : planner::flat_parameter_order(other.inventory)) {
      const planner::TensorInfo& tensor = other.inventory.tensors[static_cast<size_t>(flat.tensor_index)];
      if (tensor.tied_copy) continue;
      std::copy_n(values->data() + flat.offset, flat.numel, out + offset_of.at(tensor.name));
    }
  }
  return Status::success();
}

}  // namespace

Result<std::vector<CheckpointFile>> write_consolidated_checkpoint(const ConsolidationGroups& groups, OptimizerShard& optimizer, const planner::Model& part,
                                                                  const planner::Model& stage, const planner::Model& whole,
                                                                  const planner::PluginOptions& plugin, planner::OptimizerKind kind,
                                                                  const std::string& directory, const TrainingPosition& position) {
  const bool holds_part = groups.data.rank() == 0, holds_stage = holds_part && groups.tensor.rank() == 0, holds_whole = groups.world.rank() == 0;
  const auto states = static_cast<int>(planner::optimizer_state_count(kind));
  std::vector<std::vector<float>> gathered(static_cast<size_t>(states + 1));
  std::vector<float> values_of_part, values_of_stage;
  for (int v = 0; v <= states; ++v) {  // the weights, then each state
    const float* mine = v == 0 ? optimizer.weights() : optimizer.state(v - 1);
    values_of_part.assign(holds_part ? static_cast<size_t>(part.parameter_count) : 0, 0.0f);
    if (Status s = gather_shard_values(groups.data, optimizer, mine, part, plugin, holds_part ? values_of_part.data() : nullptr); !s) return s.error();
    if (!holds_part) continue;  // the tensor-parallel groups of data-parallel rank 0 gather on
    values_of_stage.assign(holds_stage ? static_cast<size_t>(stage.parameter_count) : 0, 0.0f);
    if (Status s = gather_tensor_parallel_parts(groups.tensor, values_of_part.data(), stage, holds_stage ? values_of_stage.data() : nullptr); !s) {
      return s.error();
    }
    if (!holds_stage) continue;  // the pipeline group of tensor-parallel rank 0 gathers on
    std::vector<float>& values = gathered[static_cast<size_t>(v)];
    if (groups.pipeline == nullptr) {
      values = std::move(values_of_stage);
      continue;
    }
    values.assign(holds_whole ? static_cast<size_t>(whole.parameter_count) : 0, 0.0f);
    if (Status s = gather_stages(*groups.pipeline, groups.model_chunks, values_of_stage, whole, values.data()); !s) return s.error();
  }
  if (!holds_whole) return std::vector<CheckpointFile>{};
  std::vector<const float*> state_values;
  for (int v = 1; v <= states; ++v) state_values.push_back(gathered[static_cast<size_t>(v)].data());
  return write_consolidated_checkpoint_files(directory, whole, gathered[0].data(), state_values, optimizer, kind, position);
}

}  // namespace tessera::engine
