#include "tessera/engine/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <ostream>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/data.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/flops.h"

namespace tessera::engine {
namespace {

using Clock = std::chrono::steady_clock;

// Weight decay on matrices and embeddings (2-D) only, not on norms and biases
// (1-D), as in GPT-2/3 training practice.
std::vector<bool> decay_mask(const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<bool> mask;
  for (const auto& shape : shapes) mask.push_back(shape.size() >= 2);
  return mask;
}

void report(std::ostream& out, bool terminal, int64_t step, int64_t steps, double loss, double tokens_per_s, double elapsed_s, double done) {
  const double eta = elapsed_s / done * static_cast<double>(steps - step);
  char line[160];
  if (terminal) {
    const int width = 30;
    const int filled = static_cast<int>(static_cast<double>(width) * static_cast<double>(step) / static_cast<double>(steps));
    std::snprintf(line, sizeof line, "\r[%.*s%*s] step %lld/%lld  loss %.4f  %.0f tokens/s  ETA %.0fs ", filled,
                  "##############################", width - filled, "", static_cast<long long>(step), static_cast<long long>(steps), loss,
                  tokens_per_s, eta);
    out << line << (step == steps ? "\n" : "") << std::flush;
  } else {
    std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f tokens/s %.0f eta %.0fs\n", static_cast<long long>(step), static_cast<long long>(steps),
                  loss, tokens_per_s, eta);
    out << line;
  }
}

std::string format_double(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// What the run computes, recorded in each checkpoint's manifest and compared
// on resume. Left out on purpose: --steps and --save-every (how long, not
// what), --recompute (the same numbers, recomputed), --seed (only the
// initialisation, which a resume does not repeat).
std::vector<RunSetting> run_settings(const planner::Model& model, const TrainOptions& o, const TokenDataset& data) {
  Crc32 config;
  config.update(o.model_config_text.data(), o.model_config_text.size());
  std::vector<RunSetting> settings{
      {"model", "--model", model.config.name + " (" + std::to_string(model.parameter_count) + " parameters, config.json CRC-32 " + config.hex() + ")"},
      {"precision", "--precision", std::string(enum_name(o.precision))},
      {"micro_batch_size", "--micro-batch", std::to_string(o.micro_batch_size)},
      {"seq_len", "--seq", std::to_string(o.seq_len)},
      {"num_micro_batches", "--micro-batches", std::to_string(o.num_micro_batches)},
      {"optimizer", "--optimizer", std::string(enum_name(o.optimizer.kind))},
      {"learning_rate", "--lr", format_double(o.optimizer.learning_rate)},
      {"data", "--data", std::to_string(data.tokens.size()) + " tokens, CRC-32 " + data.crc32}};
  if (o.precision == planner::Precision::fp16) {
    settings.push_back({"loss_scale_window", "--loss-scale-window", std::to_string(o.loss_scaler.growth_interval)});
    settings.push_back({"hysteresis", "--hysteresis", std::to_string(o.loss_scaler.hysteresis)});
  }
  return settings;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : "; ") + item;
  return out;
}

// One run of the training loop for parameters stored as T (float, bf16 or fp16).
template <typename T>
class TrainingRun {
 public:
  using W = compute_t<T>;

  TrainingRun(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, std::ostream& progress, bool terminal)
      : model_(model), o_(o), data_(data), progress_(progress), terminal_(terminal), settings_(run_settings(model, o, data)) {}

  // Builds the model and optimizer and restores the checkpoint, if resuming.
  Status prepare();
  Result<TrainMetrics> run();

 private:
  Status resume_from_checkpoint();
  bool stop_requested() const { return o_.stop_requested && o_.stop_requested(); }
  bool weights_finite();
  Status save(int64_t step, int64_t data_position);
  Status commit_checkpoint(int64_t step, int64_t data_position);
  Error diverged(const std::string& what, int64_t step, int64_t position_before);
  Result<double> accumulate_gradients(int64_t step, double loss_scale);

  const planner::Model& model_;
  const TrainOptions& o_;
  const TokenDataset& data_;
  std::ostream& progress_;
  const bool terminal_;
  const std::vector<RunSetting> settings_;
  TrainMetrics metrics_;
  std::optional<Transformer<T>> net_;
  std::optional<Optimizer<T>> optimizer_;
  // fp16 overflows above 65504 and underflows below 2^-24: its gradients need loss scaling.
  std::optional<DynamicLossScaler> scaler_;
  std::optional<DataLoader> loader_;
  TrainingPosition start_;
  std::string run_id_ = new_run_id();
  int64_t committed_step_ = 0;
  Clock::time_point started_ = Clock::now();
  std::vector<int32_t> tokens_, targets_;
};

template <typename T>
Status TrainingRun<T>::prepare() {
  auto created = Transformer<T>::create(model_, metrics_.ledger, o_.micro_batch_size, o_.seq_len, o_.seed, o_.recompute);
  if (!created) return created.error();
  net_.emplace(std::move(created).value());
  optimizer_.emplace(metrics_.ledger, net_->parameters(), decay_mask(net_->parameter_shapes()), o_.optimizer);
  if (o_.precision == planner::Precision::fp16) scaler_.emplace(o_.loss_scaler);
  if (Status s = resume_from_checkpoint(); !s) return s;
  if (scaler_ && start_.loss_scaler.scale > 0) scaler_->restore(start_.loss_scaler);
  loader_.emplace(data_, o_.micro_batch_size, o_.seq_len, start_.data_position);
  metrics_.first_step = start_.step + 1;
  committed_step_ = metrics_.checkpoint_step = start_.step;
  tokens_.resize(static_cast<size_t>(o_.micro_batch_size * o_.seq_len));
  targets_.resize(tokens_.size());
  return Status::success();
}

template <typename T>
Status TrainingRun<T>::resume_from_checkpoint() {
  RunDirectory* dir = o_.run_directory;
  if (dir == nullptr) return Status::success();
  if (!o_.resume) {
    if (!dir->holds_checkpoint()) return Status::success();
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
    progress_ << "no checkpoint in " << dir->path() << " yet: starting at step 1\n";
    return Status::success();
  }
  const CommittedCheckpoint& checkpoint = committed->value();
  const std::vector<std::string> changes = changed_settings(checkpoint.manifest.settings, settings_);
  if (!changes.empty() && !o_.allow_changes) {
    return make_error(ErrorCode::invalid_argument, "--resume: the checkpoint in " + dir->path() + " (step " + std::to_string(checkpoint.manifest.step) +
                                                       ") was trained otherwise: " + joined(changes) +
                                                       "; give the same options, or add --allow-changes to continue with the new ones");
  }
  for (const std::string& change : changes) progress_ << "note: --allow-changes: " << change << "\n";
  auto position = load_checkpoint(checkpoint, *net_, *optimizer_, o_.optimizer.kind);
  if (!position) return position.error();
  start_ = position.value();
  run_id_ = checkpoint.manifest.run_id;
  return Status::success();
}

template <typename T>
bool TrainingRun<T>::weights_finite() {
  for (size_t p = 0; p < net_->parameters().size(); ++p) {
    const W* w = optimizer_->full_precision(net_->parameters(), p);
    for (int64_t i = 0; i < net_->parameters()[p].numel(); ++i) {
      if (!std::isfinite(static_cast<double>(w[i]))) return false;
    }
  }
  return true;
}

// Checkpoint and metrics so far: what a NaN, a signal or a crash later leaves behind.
template <typename T>
Status TrainingRun<T>::save(int64_t step, int64_t data_position) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const auto steps_run = static_cast<double>(metrics_.loss.size());
  const double tokens_per_step = static_cast<double>(o_.num_micro_batches * o_.micro_batch_size * o_.seq_len);
  const planner::FlopsPerToken flops = planner::flops_per_token(model_, o_.seq_len, planner::RecomputeMode::none);
  metrics_.tokens_per_s = steps_run > 0 ? tokens_per_step * steps_run / elapsed : 0.0;
  metrics_.achieved_flops_per_s = metrics_.tokens_per_s * (flops.forward + flops.backward);
  if (o_.run_directory == nullptr) return Status::success();
  if (step > committed_step_) {
    if (Status s = commit_checkpoint(step, data_position); !s) return s;
  }
  return o_.on_save ? o_.on_save(metrics_) : Status::success();
}

template <typename T>
Status TrainingRun<T>::commit_checkpoint(int64_t step, int64_t data_position) {
  if (!weights_finite()) {
    return make_error(ErrorCode::invalid_argument, "the weights are not finite after step " + std::to_string(step) + "; the checkpoint at step " +
                                                       std::to_string(committed_step_) + " is kept; lower --lr");
  }
  RunDirectory& dir = *o_.run_directory;
  auto staging = dir.stage(step);
  if (!staging) return staging.error();
  const TrainingPosition position{step, data_position, scaler_ ? scaler_->state() : LossScalerState{}};
  auto files = write_checkpoint_files(staging->directory, *net_, *optimizer_, o_.optimizer.kind, position);
  if (!files) return files.error();
  CheckpointManifest manifest{step, run_id_, std::move(files).value(), settings_};
  if (!o_.model_config_text.empty()) {
    auto config = write_new_file(staging->directory + "/config.json", o_.model_config_text);
    if (!config) return config.error();
    manifest.files.push_back({"config.json", config.value()});
  }
  if (Status s = dir.commit(staging.value(), manifest, {kModelFileName, kOptimizerFileName}); !s) return s;
  committed_step_ = metrics_.checkpoint_step = step;
  return Status::success();
}

// A step whose loss or gradients are not finite: the optimizer has not
// stepped, so the weights are those after the last good step. Commit them if
// they are finite; an earlier finite checkpoint is never replaced by a poisoned one.
template <typename T>
Error TrainingRun<T>::diverged(const std::string& what, int64_t step, int64_t position_before) {
  std::string kept;
  if (o_.run_directory != nullptr && step - 1 > committed_step_) {
    if (Status s = save(step - 1, position_before); !s) kept = " (" + s.error().message + ")";
  }
  const std::string checkpoint = committed_step_ > 0 ? "the checkpoint holds step " + std::to_string(committed_step_) + ", the last with finite weights"
                                                     : "no checkpoint was saved";
  return make_error(ErrorCode::invalid_argument, what + " at step " + std::to_string(step) + "; " + checkpoint + kept + "; lower --lr");
}

// Forward and backward over the step's micro-batches; nullopt-like error when stopped.
template <typename T>
Result<double> TrainingRun<T>::accumulate_gradients(int64_t step, double loss_scale) {
  net_->zero_gradients();
  double loss = 0;
  for (int64_t micro = 0; micro < o_.num_micro_batches; ++micro) {
    if (stop_requested()) return make_error(ErrorCode::invalid_argument, "stopped during step " + std::to_string(step));
    loader_->next(tokens_.data(), targets_.data());
    loss += net_->forward(tokens_.data(), targets_.data()) / static_cast<double>(o_.num_micro_batches);
    net_->backward(static_cast<W>(loss_scale / static_cast<double>(o_.num_micro_batches)));  // k micro-batches of b = one batch of k·b
  }
  return loss;
}

template <typename T>
Result<TrainMetrics> TrainingRun<T>::run() {
  if (metrics_.first_step > o_.steps) return std::move(metrics_);  // the checkpoint is at --steps already: nothing to do
  const double tokens_per_step = static_cast<double>(o_.num_micro_batches * o_.micro_batch_size * o_.seq_len);
  started_ = Clock::now();
  for (int64_t step = metrics_.first_step; step <= o_.steps; ++step) {
    const auto step_start = Clock::now();
    const int64_t position_before = loader_->position();
    const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
    auto loss = accumulate_gradients(step, loss_scale);
    if (!loss) {  // a stop was requested: the step is abandoned, the last complete one saved
      metrics_.stopped = true;
      if (Status s = save(step - 1, position_before); !s) return s.error();
      return std::move(metrics_);
    }
    if (!std::isfinite(loss.value())) return diverged("loss is " + std::to_string(loss.value()), step, position_before);
    const std::optional<double> grad_norm = optimizer_->step(net_->parameters(), net_->gradients(), loss_scale);
    if (scaler_) {
      scaler_->update(!grad_norm.has_value());
      if (!grad_norm) {
        char line[160];
        std::snprintf(line, sizeof line, "%sstep %lld: gradients overflowed at loss scale %g; step skipped, loss scale now %g\n", terminal_ ? "\n" : "",
                      static_cast<long long>(step), loss_scale, scaler_->scale());
        progress_ << line;
        metrics_.skipped_steps.push_back(step);
      }
    } else if (!grad_norm) {
      return diverged("a gradient is inf or NaN", step, position_before);
    }
    metrics_.grad_norm.push_back(grad_norm.value_or(std::numeric_limits<double>::quiet_NaN()));
    metrics_.loss_scale.push_back(loss_scale);
    metrics_.loss.push_back(loss.value());
    metrics_.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    if (o_.save_every > 0 && step % o_.save_every == 0 && step < o_.steps) {
      if (Status s = save(step, loader_->position()); !s) return s.error();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    if (terminal_ || step % o_.log_every == 0 || step == o_.steps) {
      const double done = static_cast<double>(step - metrics_.first_step + 1);
      report(progress_, terminal_, step, o_.steps, loss.value(), tokens_per_step * done / elapsed, elapsed, done);
    }
  }
  if (Status s = save(o_.steps, loader_->position()); !s) return s.error();
  return std::move(metrics_);
}

template <typename T>
Result<TrainMetrics> train_as(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, std::ostream& progress, bool terminal) {
  TrainingRun<T> run(model, o, data, progress, terminal);
  if (Status s = run.prepare(); !s) return s.error();
  return run.run();
}

Result<TrainMetrics> train_in_precision(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, std::ostream& progress,
                                        bool terminal) {
  switch (o.precision) {
    case planner::Precision::fp32: return train_as<float>(model, o, data, progress, terminal);
    case planner::Precision::bf16: return train_as<bf16>(model, o, data, progress, terminal);
    case planner::Precision::fp16: return train_as<fp16>(model, o, data, progress, terminal);
  }
  return make_error(ErrorCode::invalid_argument, "unknown precision");
}

}  // namespace

Result<TrainMetrics> train(const planner::Model& model, const TrainOptions& o, std::ostream& progress, bool terminal) {
  if (o.steps <= 0) return make_error(ErrorCode::invalid_argument, "--steps must be a positive integer");
  if (o.num_micro_batches <= 0) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  if (o.log_every <= 0) return make_error(ErrorCode::invalid_argument, "the log interval must be a positive number of steps");
  try {
    auto data = load_token_file(o.data_path);
    if (!data) return data.error();
    if (data->vocab_size > model.config.vocab_size) {
      return make_error(ErrorCode::invalid_argument, "--data holds token ids up to " + std::to_string(data->vocab_size - 1) + " but " +
                                                         model.config.name + " has a vocabulary of " + std::to_string(model.config.vocab_size));
    }
    if (static_cast<int64_t>(data->tokens.size()) <= o.micro_batch_size * o.seq_len) {
      return make_error(ErrorCode::invalid_argument,
                        "--data has fewer tokens than one micro-batch (" + std::to_string(o.micro_batch_size * o.seq_len + 1) + ")");
    }
    return train_in_precision(model, o, data.value(), progress, terminal);
  } catch (const std::bad_alloc& e) {
    // AllocationFailure names the tensor's category and size; other allocations say only that memory ran out.
    const std::string what = dynamic_cast<const AllocationFailure*>(&e) != nullptr ? e.what() : "out of memory";
    return make_error(ErrorCode::invalid_argument, what + "; lower --micro-batch or --seq, or use --recompute full");
  }
}

}  // namespace tessera::engine
