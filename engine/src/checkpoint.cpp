#include "tessera/engine/checkpoint.h"

#include <algorithm>
#include <cstring>

#include "tessera/engine/safetensors.h"

namespace tessera::engine {
namespace {

std::vector<std::string> state_suffixes(planner::OptimizerKind kind) {
  switch (kind) {
    case planner::OptimizerKind::adam:
    case planner::OptimizerKind::adamw: return {".exp_avg", ".exp_avg_sq"};  // torch.optim.Adam's state names
    case planner::OptimizerKind::sgd_momentum: return {".momentum_buffer"};
    case planner::OptimizerKind::sgd: return {};
  }
  return {};
}

Status restore(const SafetensorsFile& file, const std::string& name, const std::vector<int64_t>& shape, Tensor<float>& into,
               const std::string& path) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) return make_error(ErrorCode::parse_error, path + ": missing tensor '" + name + "' (a checkpoint of another model?)");
  if (it->second.shape != shape) return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has another shape than the model's");
  std::memcpy(into.data(), it->second.data.data(), static_cast<size_t>(into.bytes()));
  return Status::success();
}

}  // namespace

Status save_checkpoint(const std::string& dir, Transformer<float>& model, Optimizer<float>& optimizer, planner::OptimizerKind kind,
                       const TrainingPosition& position) {
  const auto& names = model.parameter_names();
  const auto& shapes = model.parameter_shapes();
  std::vector<TensorView> weights, states;
  const auto suffixes = state_suffixes(kind);
  for (size_t p = 0; p < names.size(); ++p) {
    weights.push_back({names[p], shapes[p], model.parameters()[p].data()});
    for (size_t s = 0; s < suffixes.size(); ++s) states.push_back({names[p] + suffixes[s], shapes[p], optimizer.states()[p * suffixes.size() + s].data()});
  }
  if (Status s = write_safetensors(dir + "/model.safetensors", weights, {{"format", "pt"}}); !s) return s;
  return write_safetensors(dir + "/optimizer.safetensors", states,
                           {{"step", std::to_string(position.step)}, {"data_position", std::to_string(position.data_position)},
                            {"optimizer", std::string(enum_name(kind))}});
}

Status load_model_weights(const std::string& dir, Transformer<float>& model) {
  const std::string path = dir + "/model.safetensors";
  auto weights = read_safetensors(path);
  if (!weights) return weights.error();
  for (size_t p = 0; p < model.parameter_names().size(); ++p) {
    if (Status s = restore(weights.value(), model.parameter_names()[p], model.parameter_shapes()[p], model.parameters()[p], path); !s) return s;
  }
  return Status::success();
}

Result<TrainingPosition> load_checkpoint(const std::string& dir, Transformer<float>& model, Optimizer<float>& optimizer,
                                         planner::OptimizerKind kind) {
  const std::string optimizer_path = dir + "/optimizer.safetensors";
  if (Status s = load_model_weights(dir, model); !s) return s.error();
  auto states = read_safetensors(optimizer_path);
  if (!states) return states.error();
  std::map<std::string, std::string> metadata = states->metadata;
  if (metadata["optimizer"] != enum_name(kind)) {
    return make_error(ErrorCode::invalid_argument, "--resume: the checkpoint was trained with --optimizer " + metadata["optimizer"]);
  }
  const auto& names = model.parameter_names();
  const auto suffixes = state_suffixes(kind);
  for (size_t p = 0; p < names.size(); ++p) {
    for (size_t s = 0; s < suffixes.size(); ++s) {
      Status restored = restore(states.value(), names[p] + suffixes[s], model.parameter_shapes()[p], optimizer.states()[p * suffixes.size() + s], optimizer_path);
      if (!restored) return restored.error();
    }
  }
  TrainingPosition position;
  try {
    position.step = std::stoll(metadata.at("step"));
    position.data_position = std::stoll(metadata.at("data_position"));
  } catch (const std::exception&) {
    return make_error(ErrorCode::parse_error, optimizer_path + ": metadata lacks a numeric 'step' or 'data_position'");
  }
  if (position.step < 0 || position.data_position < 0) {
    return make_error(ErrorCode::parse_error, optimizer_path + ": negative 'step' or 'data_position' in the metadata");
  }
  optimizer.set_steps_taken(position.step);
  return position;
}

}  // namespace tessera::engine
