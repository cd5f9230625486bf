#include "tessera/engine/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

Status restore(const SafetensorsFile& file, const std::string& name, const std::vector<int64_t>& shape, float* into, const std::string& path) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) return make_error(ErrorCode::parse_error, path + ": missing tensor '" + name + "' (a checkpoint of another model?)");
  if (it->second.shape != shape) return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has another shape than the model's");
  std::copy(it->second.data.begin(), it->second.data.end(), into);
  return Status::success();
}

// A crash between the two renames of a save could pair a new model file with
// an old optimizer file: both carry the step, and they must agree.
Status check_same_step(const std::string& dir, std::map<std::string, std::string>& optimizer_metadata) {
  auto model = read_safetensors(dir + "/model.safetensors");
  if (!model) return model.error();
  const auto step = model->metadata.find("step");
  if (step != model->metadata.end() && step->second != optimizer_metadata["step"]) {
    return make_error(ErrorCode::parse_error, "--resume: " + dir + "/model.safetensors is from step " + step->second + " but optimizer.safetensors from step " +
                                                  optimizer_metadata["step"] + "; restore both files from one save");
  }
  return Status::success();
}

// Restores DIR/model.safetensors into the full-precision weights of `model`.
template <typename T, typename Target>
Status restore_weights(const std::string& dir, Transformer<T>& model, Target&& weights_of) {
  const std::string path = dir + "/model.safetensors";
  auto weights = read_safetensors(path);
  if (!weights) return weights.error();
  for (size_t p = 0; p < model.parameter_names().size(); ++p) {
    if (Status s = restore(weights.value(), model.parameter_names()[p], model.parameter_shapes()[p], weights_of(p), path); !s) return s;
  }
  return Status::success();
}

Result<int64_t> metadata_integer(std::map<std::string, std::string>& metadata, const std::string& key, const std::string& path) {
  const std::string& text = metadata[key];
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return make_error(ErrorCode::parse_error, path + ": metadata lacks a whole number '" + key + "'");
  }
  if (value < 0) return make_error(ErrorCode::parse_error, path + ": negative '" + key + "' in the metadata");
  return value;
}

}  // namespace

template <typename T>
Status save_checkpoint(const std::string& dir, Transformer<T>& model, Optimizer<T>& optimizer, planner::OptimizerKind kind,
                       const TrainingPosition& position) {
  const auto& names = model.parameter_names();
  const auto& shapes = model.parameter_shapes();
  std::vector<TensorView> weights, states;
  const auto suffixes = state_suffixes(kind);
  for (size_t p = 0; p < names.size(); ++p) {
    weights.push_back({names[p], shapes[p], optimizer.full_precision(model.parameters(), p)});
    for (size_t s = 0; s < suffixes.size(); ++s) states.push_back({names[p] + suffixes[s], shapes[p], optimizer.states()[p * suffixes.size() + s].data()});
  }
  // Both files are staged before either replaces its predecessor: a failed
  // save (disk full) leaves the previous pair untouched.
  const std::string model_path = dir + "/model.safetensors", optimizer_path = dir + "/optimizer.safetensors";
  if (Status s = stage_safetensors(model_path, weights, {{"format", "pt"}, {"step", std::to_string(position.step)}}); !s) return s;
  const LossScalerState& scaler = position.loss_scaler;
  char scale[40];
  std::snprintf(scale, sizeof scale, "%.17g", scaler.scale);
  Status staged = stage_safetensors(optimizer_path, states,
                           {{"step", std::to_string(position.step)},
                            {"data_position", std::to_string(position.data_position)},
                            {"optimizer", std::string(enum_name(kind))},
                            // Adam's bias correction counts updates: fewer than steps when fp16 skipped some.
                            {"optimizer_steps", std::to_string(optimizer.steps_taken())},
                            {"loss_scale", scale},
                            {"loss_scale_good_steps", std::to_string(scaler.good_steps)},
                            {"loss_scale_hysteresis_left", std::to_string(scaler.hysteresis_left)},
                            {"skipped_steps", std::to_string(scaler.skipped)}});
  if (!staged) {
    discard_staged({model_path});
    return staged;
  }
  return commit_staged({model_path, optimizer_path});
}

Status load_model_weights(const std::string& dir, Transformer<float>& model) {
  return restore_weights(dir, model, [&](size_t p) { return model.parameters()[p].data(); });
}

template <typename T>
Result<TrainingPosition> load_checkpoint(const std::string& dir, Transformer<T>& model, Optimizer<T>& optimizer, planner::OptimizerKind kind) {
  const std::string optimizer_path = dir + "/optimizer.safetensors";
  if (Status s = restore_weights(dir, model, [&](size_t p) { return optimizer.full_precision(model.parameters(), p); }); !s) return s.error();
  optimizer.round_into(model.parameters());
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
      Status restored = restore(states.value(), names[p] + suffixes[s], model.parameter_shapes()[p],
                                optimizer.states()[p * suffixes.size() + s].data(), optimizer_path);
      if (!restored) return restored.error();
    }
  }
  TrainingPosition position;
  if (Status s = check_same_step(dir, metadata); !s) return s.error();
  for (auto [key, target] : {std::pair<const char*, int64_t*>{"step", &position.step}, {"data_position", &position.data_position}}) {
    auto value = metadata_integer(metadata, key, optimizer_path);
    if (!value) return value.error();
    *target = value.value();
  }
  if (metadata.contains("loss_scale")) {  // absent in checkpoints written before mixed precision
    for (auto [key, target] : {std::pair<const char*, int64_t*>{"loss_scale_good_steps", &position.loss_scaler.good_steps},
                               {"loss_scale_hysteresis_left", &position.loss_scaler.hysteresis_left},
                               {"skipped_steps", &position.loss_scaler.skipped}}) {
      auto value = metadata_integer(metadata, key, optimizer_path);
      if (!value) return value.error();
      *target = value.value();
    }
    char* end = nullptr;
    const std::string& scale = metadata["loss_scale"];
    position.loss_scaler.scale = std::strtod(scale.c_str(), &end);
    const double stored = position.loss_scaler.scale;
    if (scale.empty() || *end != '\0' || !std::isfinite(stored) || (stored != 0 && stored < 1)) {
      return make_error(ErrorCode::parse_error, optimizer_path + ": metadata 'loss_scale' must be 0 (no scaler) or a finite number of at least 1");
    }
  }
  int64_t updates = position.step - position.loss_scaler.skipped;  // checkpoints without "optimizer_steps"
  if (metadata.contains("optimizer_steps")) {
    auto value = metadata_integer(metadata, "optimizer_steps", optimizer_path);
    if (!value) return value.error();
    updates = value.value();
  }
  if (updates < 0 || updates > position.step) {
    return make_error(ErrorCode::parse_error, optimizer_path + ": 'optimizer_steps' must lie between 0 and 'step'");
  }
  optimizer.set_steps_taken(updates);
  return position;
}

#define TESSERA_INSTANTIATE_CHECKPOINT(T)                                                                                              \
  template Status save_checkpoint(const std::string&, Transformer<T>&, Optimizer<T>&, planner::OptimizerKind, const TrainingPosition&); \
  template Result<TrainingPosition> load_checkpoint(const std::string&, Transformer<T>&, Optimizer<T>&, planner::OptimizerKind);
TESSERA_INSTANTIATE_CHECKPOINT(float)
TESSERA_INSTANTIATE_CHECKPOINT(bf16)
TESSERA_INSTANTIATE_CHECKPOINT(fp16)
#undef TESSERA_INSTANTIATE_CHECKPOINT

}  // namespace tessera::engine
