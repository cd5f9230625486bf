#include "tessera/engine/checkpoint.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <type_traits>

#include "tessera/engine/safetensors.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/enum_names.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/tensor_parallel.h"

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

// Restores PATH's tensors into the full-precision weights of `model`:
// `weights_of(p)` is where parameter p's elements go.
template <typename T, typename Target>
Result<SafetensorsReader> restore_weights(const std::string& path, Transformer<T>& model, Target&& weights_of) {
  auto reader = SafetensorsReader::open(path);
  if (!reader) return reader.error();
  for (size_t p = 0; p < model.parameter_names().size(); ++p) {
    if (Status s = reader->read(model.parameter_names()[p], model.parameter_shapes()[p], weights_of(p)); !s) return s.error();
  }
  return reader;
}

// Where each parameter starts in the optimizer's shard, when the shard holds
// every parameter whole (one rank, or replicated states): a checkpoint file
// holds whole tensors.
Result<std::vector<int64_t>> whole_parameter_offsets(const OptimizerShard& optimizer, size_t parameters) {
  std::vector<int64_t> offsets(parameters, -1);
  for (const planner::ShardPiece& piece : optimizer.pieces()) {
    if (piece.offset_in_parameter == 0 && static_cast<size_t>(piece.parameter) < parameters) offsets[static_cast<size_t>(piece.parameter)] = piece.offset_in_shard;
  }
  for (int64_t offset : offsets) {
    if (offset < 0 || optimizer.pieces().size() != parameters) {
      return make_error(ErrorCode::unsupported, "a checkpoint of a sharded optimizer needs its shard files");
    }
  }
  return offsets;
}

Result<int64_t> metadata_integer(const std::map<std::string, std::string>& metadata, const std::string& key, const std::string& path) {
  const auto it = metadata.find(key);
  const std::string text = it == metadata.end() ? "" : it->second;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return make_error(ErrorCode::parse_error, path + ": metadata lacks a whole number '" + key + "'");
  }
  if (value < 0) return make_error(ErrorCode::parse_error, path + ": negative '" + key + "' in the metadata");
  return value;
}

Status check_step(const std::map<std::string, std::string>& metadata, int64_t step, const std::string& path) {
  auto stored = metadata_integer(metadata, "step", path);
  if (!stored) return stored.error();
  if (stored.value() != step) {
    return make_error(ErrorCode::parse_error, path + " is from step " + std::to_string(stored.value()) + " but its manifest says step " +
                                                  std::to_string(step) + "; this checkpoint cannot be resumed");
  }
  return Status::success();
}

Result<LossScalerState> read_loss_scaler(const std::map<std::string, std::string>& metadata, const std::string& path) {
  LossScalerState state;
  for (auto [key, target] : {std::pair<const char*, int64_t*>{"loss_scale_good_steps", &state.good_steps},
                             {"loss_scale_hysteresis_left", &state.hysteresis_left},
                             {"skipped_steps", &state.skipped}}) {
    auto value = metadata_integer(metadata, key, path);
    if (!value) return value.error();
    *target = value.value();
  }
  const auto it = metadata.find("loss_scale");
  const std::string scale = it == metadata.end() ? "" : it->second;
  char* end = nullptr;
  state.scale = std::strtod(scale.c_str(), &end);
  if (scale.empty() || *end != '\0' || !std::isfinite(state.scale) || (state.scale != 0 && state.scale < 1)) {
    return make_error(ErrorCode::parse_error, path + ": metadata 'loss_scale' must be 0 (no scaler) or a finite number of at least 1");
  }
  return state;
}

}  // namespace

namespace {

// The optimizer file's metadata: where training stands.
std::map<std::string, std::string> position_metadata(const OptimizerShard& optimizer, planner::OptimizerKind kind, const TrainingPosition& position) {
  const LossScalerState& scaler = position.loss_scaler;
  char scale[40];
  std::snprintf(scale, sizeof scale, "%.17g", scaler.scale);
  return {{"step", std::to_string(position.step)},
          {"data_position", std::to_string(position.data_position)},
          {"optimizer", std::string(enum_name(kind))},
          // Adam's bias correction counts updates: fewer than steps when fp16 skipped some.
          {"optimizer_steps", std::to_string(optimizer.steps_taken())},
          {"loss_scale", scale},
          {"loss_scale_good_steps", std::to_string(scaler.good_steps)},
          {"loss_scale_hysteresis_left", std::to_string(scaler.hysteresis_left)},
          {"skipped_steps", std::to_string(scaler.skipped)}};
}

// Every parameter of `model` whole, under its name + `suffix`, from the flat values `flat` (the whole model in flat order).
std::vector<TensorView> whole_tensor_views(const planner::Model& model, const float* flat, const std::string& suffix) {
  std::vector<TensorView> views;
  for (const planner::FlatParameter& p : planner::flat_parameter_order(model.inventory)) {
    const planner::TensorInfo& tensor = model.inventory.tensors[static_cast<size_t>(p.tensor_index)];
    views.push_back({tensor.name + suffix, tensor.shape, flat + p.offset});
  }
  return views;
}

}  // namespace

template <typename T>
Result<std::vector<CheckpointFile>> write_checkpoint_files(const std::string& directory, Transformer<T>& model, OptimizerShard& optimizer,
                                                           planner::OptimizerKind kind, const TrainingPosition& position) {
  const auto& names = model.parameter_names();
  const auto& shapes = model.parameter_shapes();
  auto offsets = whole_parameter_offsets(optimizer, names.size());
  if (!offsets) return offsets.error();
  std::vector<TensorView> weights, states;
  const auto suffixes = state_suffixes(kind);
  const float* full = optimizer.weights();
  for (size_t p = 0; p < names.size(); ++p) {
    const int64_t offset = offsets.value()[p];
    weights.push_back({names[p], shapes[p], full + offset});
    for (size_t s = 0; s < suffixes.size(); ++s) {
      states.push_back({names[p] + suffixes[s], shapes[p], optimizer.state(static_cast<int>(s)) + offset});
    }
  }
  auto model_file = write_safetensors(directory + "/" + kModelFileName, weights, {{"format", "pt"}, {"step", std::to_string(position.step)}});
  if (!model_file) return model_file.error();
  auto optimizer_file = write_safetensors(directory + "/" + kOptimizerFileName, states, position_metadata(optimizer, kind, position));
  if (!optimizer_file) return optimizer_file.error();
  return std::vector<CheckpointFile>{{kModelFileName, model_file.value()}, {kOptimizerFileName, optimizer_file.value()}};
}

std::string optimizer_shard_file_name(int rank, int ranks) {
  char name[64];
  std::snprintf(name, sizeof name, "optimizer-rank-%05d-of-%05d.safetensors", rank, ranks);
  return name;
}

Result<std::vector<CheckpointFile>> write_sharded_checkpoint_files(const std::string& directory, const planner::Model& model, OptimizerShard& optimizer,
                                                                   planner::OptimizerKind kind, const TrainingPosition& position, int rank, int ranks,
                                                                   const float* weights, const std::map<std::string, std::string>& layout) {
  std::vector<CheckpointFile> files;
  if (rank == 0) {
    auto model_file = write_safetensors(directory + "/" + kModelFileName, whole_tensor_views(model, weights, ""),
                                        {{"format", "pt"}, {"step", std::to_string(position.step)}});
    if (!model_file) return model_file.error();
    files.push_back({kModelFileName, model_file.value()});
  }
  const std::vector<int64_t> shape{optimizer.numel()};
  const auto suffixes = state_suffixes(kind);
  std::vector<TensorView> states;
  for (size_t s = 0; s < suffixes.size(); ++s) states.push_back({suffixes[s].substr(1), shape, optimizer.state(static_cast<int>(s))});
  auto metadata = position_metadata(optimizer, kind, position);
  metadata["rank"] = std::to_string(rank);
  metadata["ranks"] = std::to_string(ranks);
  metadata.insert(layout.begin(), layout.end());
  const std::string name = optimizer_shard_file_name(rank, ranks);
  auto shard = write_safetensors(directory + "/" + name, states, metadata);
  if (!shard) return shard.error();
  files.push_back({name, shard.value()});
  return files;
}

std::map<std::string, std::string> shard_layout_metadata(const planner::Model& model, const planner::PluginOptions& plugin, int64_t dp) {
  // The ZeRO stage too: hybrid_parallel shards only from stage 1 on, which its kind alone does not say.
  std::map<std::string, std::string> layout{{"plugin", std::string(enum_name(plugin.kind))}, {"zero_stage", std::to_string(plugin.effective_zero_stage())}};
  if (plugin.kind == planner::PluginKind::gemini) layout["chunk_size"] = std::to_string(planner::gemini_chunk_size(model.inventory, plugin.gemini, dp));
  return layout;
}

Result<std::vector<CheckpointFile>> write_consolidated_checkpoint_files(const std::string& directory, const planner::Model& model,
                                                                       const float* weights, const std::vector<const float*>& states,
                                                                       const OptimizerShard& optimizer, planner::OptimizerKind kind,
                                                                       const TrainingPosition& position) {
  const auto suffixes = state_suffixes(kind);
  if (states.size() != suffixes.size()) return make_error(ErrorCode::invalid_argument, "write_consolidated_checkpoint_files: one flat buffer per optimizer state");
  std::vector<TensorView> state_views;
  for (const planner::FlatParameter& flat : planner::flat_parameter_order(model.inventory)) {
    const planner::TensorInfo& tensor = model.inventory.tensors[static_cast<size_t>(flat.tensor_index)];
    for (size_t s = 0; s < suffixes.size(); ++s) state_views.push_back({tensor.name + suffixes[s], tensor.shape, states[s] + flat.offset});
  }
  auto model_file = write_safetensors(directory + "/" + kModelFileName, whole_tensor_views(model, weights, ""),
                                      {{"format", "pt"}, {"step", std::to_string(position.step)}});
  if (!model_file) return model_file.error();
  auto optimizer_file = write_safetensors(directory + "/" + kOptimizerFileName, state_views, position_metadata(optimizer, kind, position));
  if (!optimizer_file) return optimizer_file.error();
  return std::vector<CheckpointFile>{{kModelFileName, model_file.value()}, {kOptimizerFileName, optimizer_file.value()}};
}

Status load_model_weights(const std::string& dir, Transformer<float>& model) {
  auto restored = restore_weights(dir + "/" + kModelFileName, model, [&](size_t p) { return model.parameters()[p].data(); });
  return restored ? Status::success() : Status(restored.error());
}

namespace {

// The optimizer file's metadata: the optimizer it was trained with, and where
// training stands (the step, data position, loss scaler, updates taken).
Result<TrainingPosition> read_position(const std::map<std::string, std::string>& metadata, const std::string& path, int64_t step,
                                       planner::OptimizerKind kind, OptimizerShard& optimizer) {
  if (Status s = check_step(metadata, step, path); !s) return s.error();
  const auto optimizer_name = metadata.find("optimizer");
  if (optimizer_name == metadata.end() || optimizer_name->second != enum_name(kind)) {
    return make_error(ErrorCode::invalid_argument, "--resume: the checkpoint was trained with --optimizer " +
                                                       (optimizer_name == metadata.end() ? std::string("(unknown)") : optimizer_name->second));
  }
  TrainingPosition position;
  position.step = step;
  auto data_position = metadata_integer(metadata, "data_position", path);
  if (!data_position) return data_position.error();
  position.data_position = data_position.value();
  auto scaler = read_loss_scaler(metadata, path);
  if (!scaler) return scaler.error();
  position.loss_scaler = scaler.value();
  auto updates = metadata_integer(metadata, "optimizer_steps", path);
  if (!updates) return updates.error();
  if (updates.value() > position.step) return make_error(ErrorCode::parse_error, path + ": 'optimizer_steps' must lie between 0 and 'step'");
  optimizer.set_steps_taken(updates.value());
  return position;
}

}  // namespace

namespace {

// Reads pieces of this rank's parameters from a file of whole tensors: a
// contiguous part of each tensor, or under tensor parallelism the elements of
// the whole tensor that this rank's part holds (planner::for_each_tp_element;
// a padding row of the vocabulary reads as 0).
class PieceReader {
 public:
  PieceReader(const SafetensorsReader& file, const planner::Model& description, TensorParallelRank tp)
      : file_(file), description_(description), tp_(tp), order_(planner::flat_parameter_order(description.inventory)) {}

  // `numel` elements of parameter p (named `name` + `suffix`, of this rank's
  // shape `local_shape`) from element `offset` of this rank's part, into `out`.
  Status read(size_t p, const std::string& name, const std::vector<int64_t>& local_shape, int64_t offset, int64_t numel, float* out) {
    if (tp_.size == 1) return file_.read_part(name, local_shape, offset, numel, out);
    const planner::TensorInfo& tensor = description_.inventory.tensors[static_cast<size_t>(order_[p].tensor_index)];
    whole_.resize(static_cast<size_t>(tensor.numel()));
    if (Status s = file_.read(name, tensor.shape, whole_.data()); !s) return s;
    planner::for_each_tp_element(tensor, tp_.size, tp_.rank, [&](int64_t local, int64_t full) {
      if (local >= offset && local < offset + numel) out[local - offset] = full < 0 ? 0.0f : whole_[static_cast<size_t>(full)];
    });
    return Status::success();
  }

 private:
  const SafetensorsReader& file_;
  const planner::Model& description_;
  TensorParallelRank tp_;
  std::vector<planner::FlatParameter> order_;
  std::vector<float> whole_;
};

// The fp32 weights of every piece of the optimizer's shard, from model.safetensors.
Status restore_piece_weights(const std::string& path, int64_t step, const planner::Model& description, const ParameterNames& model,
                             OptimizerShard& optimizer, TensorParallelRank tp) {
  auto weights = SafetensorsReader::open(path);
  if (!weights) return weights.error();
  if (Status s = check_step(weights->metadata(), step, path); !s) return s;
  PieceReader reader(weights.value(), description, tp);
  for (const planner::ShardPiece& piece : optimizer.pieces()) {
    const auto p = static_cast<size_t>(piece.parameter);
    if (Status s = reader.read(p, model.names[p], model.shapes[p], piece.offset_in_parameter, piece.numel, optimizer.weights() + piece.offset_in_shard);
        !s) {
      return s;
    }
  }
  optimizer.weights_restored();
  return Status::success();
}

// The shard files a checkpoint holds: "optimizer-rank-00000-of-NNNNN...", the rank count.
Result<int> saved_ranks(const CommittedCheckpoint& checkpoint) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoint.directory, ec)) {
    const std::string name = entry.path().filename().string();
    int rank = -1, ranks = 0;
    if (std::sscanf(name.c_str(), "optimizer-rank-%d-of-%d.safetensors", &rank, &ranks) == 2 && rank == 0 && ranks > 0) return ranks;
  }
  return make_error(ErrorCode::not_found, checkpoint.directory + " holds neither optimizer.safetensors nor optimizer shard files");
}

}  // namespace

template <typename T>
Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& description, Transformer<T>& model,
                                         OptimizerShard& optimizer, planner::OptimizerKind kind, TensorParallelRank tp) {
  return load_checkpoint(checkpoint, description, ParameterNames{model.parameter_names(), model.parameter_shapes()}, optimizer, kind, tp);
}

Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& description, const ParameterNames& model,
                                         OptimizerShard& optimizer, planner::OptimizerKind kind, TensorParallelRank tp) {
  const int64_t step = checkpoint.manifest.step;
  const std::string whole_path = checkpoint.file(kOptimizerFileName);
  const bool whole_states = std::filesystem::exists(whole_path);
  if (tp.size > 1 && !whole_states) {
    return make_error(ErrorCode::unsupported, "--resume: " + checkpoint.directory +
                                                  " keeps its optimizer states as shards of a data-parallel layout, which load into --tp 1 only; "
                                                  "resume it with --tp 1");
  }
  if (Status s = restore_piece_weights(checkpoint.file(kModelFileName), step, description, model, optimizer, tp); !s) return s.error();
  const auto suffixes = state_suffixes(kind);
  if (whole_states) {
    // Whole tensors under their names: each piece is a part of one.
    auto states = SafetensorsReader::open(whole_path);
    if (!states) return states.error();
    PieceReader reader(states.value(), description, tp);
    for (const planner::ShardPiece& piece : optimizer.pieces()) {
      const auto p = static_cast<size_t>(piece.parameter);
      for (size_t s = 0; s < suffixes.size(); ++s) {
        if (Status read = reader.read(p, model.names[p] + suffixes[s], model.shapes[p], piece.offset_in_parameter, piece.numel,
                                      optimizer.state(static_cast<int>(s)) + piece.offset_in_shard);
            !read) {
          return read.error();
        }
      }
    }
    return read_position(states->metadata(), whole_path, step, kind, optimizer);
  }
  // Shard files of the layout they were saved with (plugin and rank count in
  // their metadata): each piece of this rank's shard is read from the saved
  // pieces of the same parameter that overlap it, whatever the saved layout.
  auto ranks = saved_ranks(checkpoint);
  if (!ranks) return ranks.error();
  std::vector<SafetensorsReader> shards;
  for (int r = 0; r < ranks.value(); ++r) {
    auto shard = SafetensorsReader::open(checkpoint.file(optimizer_shard_file_name(r, ranks.value())));
    if (!shard) return shard.error();
    shards.push_back(std::move(shard).value());
  }
  const auto& metadata = shards.front().metadata();
  const std::string first_shard = checkpoint.file(optimizer_shard_file_name(0, ranks.value()));
  planner::PluginOptions saved;
  const auto plugin = metadata.find("plugin");
  const auto kind_saved = plugin == metadata.end() ? std::nullopt : parse_enum<planner::PluginKind>(plugin->second);
  if (!kind_saved) return make_error(ErrorCode::parse_error, first_shard + ": metadata lacks the 'plugin' that laid the shards out");
  saved.kind = *kind_saved;
  if (metadata.contains("zero_stage")) {
    auto stage = metadata_integer(metadata, "zero_stage", first_shard);
    if (!stage) return stage.error();
    saved.zero_stage = static_cast<int>(stage.value());
  } else if (saved.kind == planner::PluginKind::hybrid_parallel) {
    // Written before the stage was recorded: hybrid_parallel writes shard files at ZeRO stage 1 or 2 only, which shard alike
    // (planner::optimizer_layout).
    saved.zero_stage = 1;
  }
  if (saved.kind == planner::PluginKind::gemini) {
    auto chunk = metadata_integer(metadata, "chunk_size", first_shard);
    if (!chunk) return chunk.error();
    saved.gemini.chunk_size = chunk.value();
  }
  std::vector<std::vector<std::pair<int, planner::ShardPiece>>> saved_pieces(model.names.size());  // per parameter
  std::vector<int64_t> saved_numel(static_cast<size_t>(ranks.value()));
  for (int r = 0; r < ranks.value(); ++r) {
    const planner::OptimizerLayout layout = planner::optimizer_layout(description, saved, ranks.value(), r);
    saved_numel[static_cast<size_t>(r)] = layout.shard_numel;
    for (const planner::ShardPiece& q : layout.pieces) saved_pieces[static_cast<size_t>(q.parameter)].push_back({r, q});
  }
  for (const planner::ShardPiece& piece : optimizer.pieces()) {
    for (const auto& [r, q] : saved_pieces[static_cast<size_t>(piece.parameter)]) {
      const int64_t first = std::max(piece.offset_in_parameter, q.offset_in_parameter);
      const int64_t last = std::min(piece.offset_in_parameter + piece.numel, q.offset_in_parameter + q.numel);
      if (first >= last) continue;
      for (size_t s = 0; s < suffixes.size(); ++s) {
        const std::vector<int64_t> shape{saved_numel[static_cast<size_t>(r)]};
        if (Status read = shards[static_cast<size_t>(r)].read_part(suffixes[s].substr(1), shape, q.offset_in_shard + first - q.offset_in_parameter, last - first,
                                                                   optimizer.state(static_cast<int>(s)) + piece.offset_in_shard + first - piece.offset_in_parameter);
            !read) {
          return read.error();
        }
      }
    }
  }
  return read_position(metadata, first_shard, step, kind, optimizer);
}

#define TESSERA_INSTANTIATE_CHECKPOINT(T)                                                                                               \
  template Result<std::vector<CheckpointFile>> write_checkpoint_files(const std::string&, Transformer<T>&, OptimizerShard&,               \
                                                                      planner::OptimizerKind, const TrainingPosition&);                  \
  template Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint&, const planner::Model&, Transformer<T>&, OptimizerShard&,      \
                                                    planner::OptimizerKind, TensorParallelRank);
TESSERA_INSTANTIATE_CHECKPOINT(float)
TESSERA_INSTANTIATE_CHECKPOINT(bf16)
TESSERA_INSTANTIATE_CHECKPOINT(fp16)
#undef TESSERA_INSTANTIATE_CHECKPOINT

}  // namespace tessera::engine
