#include "tessera/engine/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <ostream>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/data.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/planner/flops.h"

namespace tessera::engine {
namespace {

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
    const int filled = static_cast<int>(width * step / steps);
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

// The training loop for parameters stored as T (float, bf16 or fp16).
template <typename T>
Result<TrainMetrics> train_as(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, std::ostream& progress, bool terminal) {
  using W = compute_t<T>;
  TrainMetrics metrics;
  auto created = Transformer<T>::create(model, metrics.ledger, o.micro_batch_size, o.seq_len, o.seed, o.recompute);
  if (!created) return created.error();
  Transformer<T> net = std::move(created).value();
  Optimizer<T> optimizer(metrics.ledger, net.parameters(), decay_mask(net.parameter_shapes()), o.optimizer);
  // fp16 overflows above 65504 and underflows below 2^-24: its gradients need loss scaling.
  std::optional<DynamicLossScaler> scaler;
  if (o.precision == planner::Precision::fp16) scaler.emplace(o.loss_scaler);
  TrainingPosition start_at;
  if (o.resume) {
    auto restored = load_checkpoint(o.checkpoint_dir, net, optimizer, o.optimizer.kind);
    if (!restored) return restored.error();
    start_at = restored.value();
    if (scaler && start_at.loss_scaler.scale > 0) scaler->restore(start_at.loss_scaler);
  }
  DataLoader loader(data, o.micro_batch_size, o.seq_len, start_at.data_position);
  metrics.first_step = start_at.step + 1;
  if (metrics.first_step > o.steps) return metrics;  // the checkpoint is at --steps already: nothing to do
  std::vector<int32_t> tokens(static_cast<size_t>(o.micro_batch_size * o.seq_len)), targets(tokens.size());
  const double tokens_per_step = static_cast<double>(o.num_micro_batches * o.micro_batch_size * o.seq_len);
  const planner::FlopsPerToken flops = planner::flops_per_token(model, o.seq_len, planner::RecomputeMode::none);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Checkpoint and metrics so far: what a NaN or a crash later leaves behind.
  const auto save = [&](int64_t step, int64_t data_position) -> Status {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const auto steps_run = static_cast<double>(metrics.loss.size());
    metrics.tokens_per_s = steps_run > 0 ? tokens_per_step * steps_run / elapsed : 0.0;
    metrics.achieved_flops_per_s = metrics.tokens_per_s * (flops.forward + flops.backward);
    if (o.checkpoint_dir.empty()) return Status::success();
    std::error_code ec;
    std::filesystem::create_directories(o.checkpoint_dir, ec);
    if (ec) return make_error(ErrorCode::io_error, "--out: cannot create '" + o.checkpoint_dir + "': " + ec.message());
    const TrainingPosition position{step, data_position, scaler ? scaler->state() : LossScalerState{}};
    if (Status s = save_checkpoint(o.checkpoint_dir, net, optimizer, o.optimizer.kind, position); !s) return s;
    return o.on_save ? o.on_save(metrics) : Status::success();
  };
  // The optimizer has not stepped: the weights are still those after the last good step. Keep them.
  const auto stop_on = [&](const std::string& what, int64_t step, int64_t position_before) -> Status {
    if (step > metrics.first_step) {
      if (Status s = save(step - 1, position_before); !s) return s;
    }
    return make_error(ErrorCode::invalid_argument, what + " at step " + std::to_string(step) + "; lower --lr (the checkpoint holds the last good step)");
  };
  for (int64_t step = metrics.first_step; step <= o.steps; ++step) {
    const auto step_start = Clock::now();
    const int64_t position_before = loader.position();
    const double loss_scale = scaler ? scaler->scale() : 1.0;
    net.zero_gradients();
    double loss = 0;
    for (int64_t micro = 0; micro < o.num_micro_batches; ++micro) {
      loader.next(tokens.data(), targets.data());
      loss += net.forward(tokens.data(), targets.data()) / static_cast<double>(o.num_micro_batches);
      net.backward(static_cast<W>(loss_scale / static_cast<double>(o.num_micro_batches)));  // k micro-batches of b = one batch of k·b
    }
    if (!std::isfinite(loss)) return stop_on("loss is " + std::to_string(loss), step, position_before).error();
    const std::optional<double> grad_norm = optimizer.step(net.parameters(), net.gradients(), loss_scale);
    if (scaler) {
      scaler->update(!grad_norm.has_value());
      if (!grad_norm) {
        char line[160];
        std::snprintf(line, sizeof line, "%sstep %lld: gradients overflowed at loss scale %g; step skipped, loss scale now %g\n", terminal ? "\n" : "",
                      static_cast<long long>(step), loss_scale, scaler->scale());
        progress << line;
        metrics.skipped_steps.push_back(step);
      }
    } else if (!grad_norm) {
      return stop_on("a gradient is inf or NaN", step, position_before).error();
    }
    metrics.grad_norm.push_back(grad_norm.value_or(std::numeric_limits<double>::quiet_NaN()));
    metrics.loss_scale.push_back(loss_scale);
    metrics.loss.push_back(loss);
    metrics.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    if (o.save_every > 0 && step % o.save_every == 0 && step < o.steps) {
      if (Status s = save(step, loader.position()); !s) return s.error();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (terminal || step % o.log_every == 0 || step == o.steps) {
      const double done = static_cast<double>(step - metrics.first_step + 1);
      report(progress, terminal, step, o.steps, loss, tokens_per_step * done / elapsed, elapsed, done);
    }
  }
  if (Status s = save(o.steps, loader.position()); !s) return s.error();
  return metrics;
}

}  // namespace

Result<TrainMetrics> train(const planner::Model& model, const TrainOptions& o, std::ostream& progress, bool terminal) {
  if (o.steps <= 0) return make_error(ErrorCode::invalid_argument, "--steps must be a positive integer");
  if (o.num_micro_batches <= 0) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  if (o.log_every <= 0) return make_error(ErrorCode::invalid_argument, "the log interval must be a positive number of steps");
  auto data = load_token_file(o.data_path);
  if (!data) return data.error();
  if (data->vocab_size > model.config.vocab_size) {
    return make_error(ErrorCode::invalid_argument, "--data holds token ids up to " + std::to_string(data->vocab_size - 1) + " but " +
                                                       model.config.name + " has a vocabulary of " + std::to_string(model.config.vocab_size));
  }
  if (static_cast<int64_t>(data->tokens.size()) <= o.micro_batch_size * o.seq_len) {
    return make_error(ErrorCode::invalid_argument, "--data has fewer tokens than one micro-batch (" + std::to_string(o.micro_batch_size * o.seq_len + 1) + ")");
  }
  switch (o.precision) {
    case planner::Precision::fp32: return train_as<float>(model, o, data.value(), progress, terminal);
    case planner::Precision::bf16: return train_as<bf16>(model, o, data.value(), progress, terminal);
    case planner::Precision::fp16: return train_as<fp16>(model, o, data.value(), progress, terminal);
  }
  return make_error(ErrorCode::invalid_argument, "unknown precision");
}

}  // namespace tessera::engine
