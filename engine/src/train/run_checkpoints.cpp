#include "tessera/engine/run_checkpoints.h"

#include <cstdio>

#include "tessera/engine/file_io.h"
#include "tessera/planner/enum_names.h"

namespace tessera::engine {
namespace {

std::string format_double(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : "; ") + item;
  return out;
}

// Rank 0, which holds the run directory, decides: the verified checkpoint to
// continue from, none (start at step 1), or a refusal.
Result<std::optional<CommittedCheckpoint>> checkpoint_to_resume(const TrainOptions& o, const std::vector<RunSetting>& settings, std::ostream& progress) {
  RunDirectory* dir = o.run_directory;
  if (dir == nullptr) return std::optional<CommittedCheckpoint>();
  if (!o.resume) {
    if (!dir->holds_checkpoint()) return std::optional<CommittedCheckpoint>();
    return make_error(ErrorCode::invalid_argument, "--out: " + dir->path() + " holds a checkpoint already; add --resume to continue it, or choose another --out");
  }
  auto committed = dir->committed();
  if (!committed) return committed.error();
  if (!committed->has_value()) {
    if (dir->holds_checkpoint()) {
      return make_error(ErrorCode::invalid_argument, "--resume: " + dir->path() +
                                                         " holds model.safetensors and optimizer.safetensors without a manifest (an earlier tessera "
                                                         "wrote them), so they cannot be verified; start a new run in another --out");
    }
    progress << "no checkpoint in " << dir->path() << " yet: starting at step 1\n";
    return std::optional<CommittedCheckpoint>();
  }
  const CommittedCheckpoint& checkpoint = committed->value();
  const std::vector<std::string> changes = changed_settings(checkpoint.manifest.settings, settings);
  if (!changes.empty() && !o.allow_changes) {
    return make_error(ErrorCode::invalid_argument, "--resume: the checkpoint in " + dir->path() + " (step " + std::to_string(checkpoint.manifest.step) +
                                                       ") was trained otherwise: " + joined(changes) +
                                                       "; give the same options, or add --allow-changes to continue with the new ones");
  }
  for (const std::string& change : changes) progress << "note: --allow-changes: " << change << "\n";
  return std::optional<CommittedCheckpoint>(checkpoint);
}

}  // namespace

// What the run computes, recorded in each checkpoint's manifest and compared
// on resume. Left out on purpose: --steps and --save-every (how long, not
// what), --recompute (the same numbers, recomputed), --seed (only the
// initialisation, which a resume does not repeat), the plugin and the number
// of ranks (the checkpoint loads into any layout with the same global batch).
std::vector<RunSetting> run_settings(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, int64_t data_parallel_ranks) {
  const int64_t global_batch = data_parallel_ranks * o.num_micro_batches * o.micro_batch_size;
  Crc32 config;
  config.update(o.model_config_text.data(), o.model_config_text.size());
  std::vector<RunSetting> settings{
      {"model", "--model", model.config.name + " (" + std::to_string(model.parameter_count) + " parameters, config.json CRC-32 " + config.hex() + ")"},
      {"precision", "--precision", std::string(enum_name(o.precision))},
      {"micro_batch_size", "--micro-batch", std::to_string(o.micro_batch_size)},
      {"seq_len", "--seq", std::to_string(o.seq_len)},
      // Sequences per step over all ranks: the same on 2 ranks × 8 micro-batches as on 4 × 4.
      {"global_batch", "the global batch (ranks × --micro-batches × --micro-batch)", std::to_string(global_batch) + " sequences"},
      {"optimizer", "--optimizer", std::string(enum_name(o.optimizer.kind))},
      {"learning_rate", "--lr", format_double(o.optimizer.learning_rate)},
      {"data", "--data", std::to_string(data.tokens.size()) + " tokens, CRC-32 " + data.crc32}};
  if (o.precision == planner::Precision::fp16) {
    settings.push_back({"loss_scale_window", "--loss-scale-window", std::to_string(o.loss_scaler.growth_interval)});
    settings.push_back({"hysteresis", "--hysteresis", std::to_string(o.loss_scaler.hysteresis)});
  }
  return settings;
}

// Rank 0's decision goes to every rank: the step to load, 0 for none, -1 for a refusal.
Result<std::optional<CommittedCheckpoint>> agree_on_checkpoint(comm::Communicator* control, const TrainOptions& o, const std::vector<RunSetting>& settings,
                                                               std::ostream& progress) {
  auto decided = checkpoint_to_resume(o, settings, progress);
  if (control == nullptr || control->size() == 1) return decided;
  std::optional<CommittedCheckpoint> checkpoint = decided.ok() ? decided.value() : std::nullopt;
  double step = !decided.ok() ? -1.0 : checkpoint ? static_cast<double>(checkpoint->manifest.step) : 0.0;
  if (Status s = control->broadcast(&step, &step, 1, comm::DataType::f64, 0); !s) return s.error();
  if (step < 0) return decided.ok() ? make_error(ErrorCode::invalid_argument, "--resume: rank 0 refused the checkpoint (its message says why)") : decided.error();
  if (step > 0 && !checkpoint) {
    CommittedCheckpoint verified_by_rank_0;
    verified_by_rank_0.manifest.step = static_cast<int64_t>(step);
    verified_by_rank_0.directory = RunDirectory::checkpoint_path(o.run_directory_path, static_cast<int64_t>(step));
    checkpoint = verified_by_rank_0;
  }
  return checkpoint;
}

Status commit_checkpoint_files(RunDirectory& dir, const CheckpointStaging& staging, CheckpointManifest manifest, const std::string& model_config_text,
                               const std::vector<std::string>& top_level_links) {
  if (!model_config_text.empty()) {
    auto config = write_new_file(staging.directory + "/config.json", model_config_text);
    if (!config) return config.error();
    manifest.files.push_back({"config.json", config.value()});
  }
  return dir.commit(staging, manifest, top_level_links);
}

}  // namespace tessera::engine
