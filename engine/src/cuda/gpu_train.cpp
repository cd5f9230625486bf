// The one-GPU training loop; see cuda/gpu_train.h.
#include "tessera/engine/cuda/gpu_train.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/data.h"
#include "tessera/planner/flops.h"

namespace tessera::engine::cuda {

Result<TrainMetrics> train_on_gpu(const planner::Model& model, const TrainOptions& options, std::ostream& progress) {
  auto data = load_training_data(options.data_path, model.config, options.micro_batch_size, options.seq_len);
  if (!data) return data.error();
  TrainMetrics metrics;
  auto made = GptTraining::create(model, metrics.ledger, options.micro_batch_size, options.seq_len, options.seed, options.optimizer);
  if (!made) return made.error();
  std::unique_ptr<GptTraining> gpu = std::move(made).value();
  DataLoader loader(data.value(), options.micro_batch_size, options.seq_len);
  const int64_t tokens_per_step = options.micro_batch_size * options.seq_len;
  std::vector<int32_t> tokens(static_cast<size_t>(tokens_per_step)), targets(tokens.size());
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t step = 1; step <= options.steps; ++step) {
    loader.next(tokens.data(), targets.data());
    const auto began = Clock::now();
    auto result = gpu->step(tokens.data(), targets.data());
    if (!result) return result.error();
    metrics.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - began).count());
    metrics.loss.push_back(result->loss);
    metrics.grad_norm.push_back(result->grad_norm);
    metrics.loss_scale.push_back(1.0);
    char line[160];
    std::snprintf(line, sizeof line, "step %lld/%lld: loss %.4f, grad norm %.4f%s\n", static_cast<long long>(step), static_cast<long long>(options.steps),
                  result->loss, result->grad_norm, result->updated ? "" : " (not finite: no update)");
    progress << line;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  metrics.tokens_per_s = seconds > 0 ? static_cast<double>(tokens_per_step * options.steps) / seconds : 0;
  const planner::FlopsPerToken flops = planner::flops_per_token(model, options.seq_len, planner::RecomputeMode::none);
  metrics.achieved_flops_per_s = metrics.tokens_per_s * (flops.forward + flops.backward);
  gpu.reset();  // its memory back before the ledger's peaks are read
  return metrics;
}

}  // namespace tessera::engine::cuda
