// The GPU training loop, on one GPU or one per rank; see cuda/gpu_train.h.
#include "tessera/engine/cuda/gpu_train.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/data.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/parallel/rank_reports.h"
#include "tessera/engine/run_checkpoints.h"
#include "tessera/engine/sharded_checkpoint.h"
#include "tessera/planner/flops.h"
#if defined(TESSERA_HAVE_NCCL)
#include "tessera/engine/comm/nccl.h"
#endif

namespace tessera::engine::cuda {
namespace {

// The gradients' communicator over the launcher's ranks, on this rank's
// device; its reductions' scratch booked in `ledger` (comm_buffers).
Result<std::unique_ptr<comm::Communicator>> data_parallel_group(const GpuRun& run, MemoryLedger& ledger) {
#if defined(TESSERA_HAVE_NCCL)
  return comm::make_nccl_communicator(*run.world, comm::NcclOptions{run.device, nullptr, run.comm_timeout, &ledger});
#else
  (void)run, (void)ledger;
  return make_error(ErrorCode::unsupported, "--gpu: this build has no NCCL (CMake found none), so it trains on one GPU only; launch without mpirun");
#endif
}

// Whether every rank has `done` (collective): a rank that failed alone must
// not leave the others waiting in the next collective. `what` failed otherwise.
Status every_rank_has(comm::Communicator* world, const Status& done, const char* what) {
  if (world == nullptr || world->size() == 1) return done;
  auto agreed = all_ranks_agree(*world, done.ok());
  if (!agreed) return agreed.error();
  if (!done) return done;
  if (!agreed.value()) return make_error(ErrorCode::unsupported, std::string("another rank could not ") + what + " (its message says why)");
  return Status::success();
}
template <typename X>
Status every_rank_has(comm::Communicator* world, const Result<X>& made, const char* what) {
  return every_rank_has(world, made.ok() ? Status::success() : Status(made.error()), what);
}

// Rank 0 (which holds the run directory) commits the checkpoint of `step`:
// the device's master weights and AdamW states copied to the host and written
// as a one-rank CPU run writes them (flat_checkpoint.h); the ranks' states are
// the same bits, so one copy is all of them, as the CPU engine's DDP saves.
Status save_replicated_checkpoint(const planner::Model& model, const TrainOptions& options, const GptTraining& gpu, const std::vector<RunSetting>& settings,
                                  const std::string& run_id, int64_t step, int64_t data_position) {
  RunDirectory* dir = options.run_directory;
  if (dir == nullptr) return Status::success();
  FlatAdamWState state = gpu.host_state(model);  // save-time host memory, outside the training ledger
  if (Status s = gpu.save_state(state); !s) return s;
  auto staging = dir->stage(step);
  if (!staging) return staging.error();
  auto files = write_flat_checkpoint_files(staging->directory, model, state, TrainingPosition{step, data_position, {}});
  if (!files) return files.error();
  return commit_checkpoint_files(*dir, staging.value(), CheckpointManifest{step, run_id, std::move(files).value(), settings}, options.model_config_text,
                                 {kModelFileName, kOptimizerFileName});
}

// Under ZeRO every rank saves its shard, as the CPU engine's low_level_zero
// does (sharded_checkpoint.h: the same files, so either engine resumes the
// other's), into the directory rank 0 staged; rank 0 commits. Collective over `world`.
Status save_sharded_checkpoint(const planner::Model& model, const TrainOptions& options, const GptTraining& gpu, comm::Communicator& world,
                               const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step, int64_t data_position) {
  RunDirectory* dir = options.run_directory;  // rank 0's
  FlatAdamWState state = gpu.host_state(model);  // save-time host memory, outside the training ledger
  const Status copied = gpu.save_state(state);
  auto staging = dir != nullptr ? dir->stage(step) : Result<CheckpointStaging>(CheckpointStaging{step, RunDirectory::staging_path(options.run_directory_path, step)});
  const Status ready = !copied ? copied : staging ? Status::success() : Status(staging.error());
  if (Status s = every_rank_has(&world, ready, "stage the checkpoint"); !s) return s;
  auto files = write_sharded_checkpoint(world, staging->directory, model, state, options.plugin, planner::OptimizerKind::adamw,
                                        TrainingPosition{step, data_position, {}});
  Status committed = files ? Status::success() : Status(files.error());
  if (dir != nullptr && committed) {
    committed = commit_checkpoint_files(*dir, staging.value(), CheckpointManifest{step, run_id, std::move(files).value(), settings}, options.model_config_text,
                                        {kModelFileName});
  }
  return every_rank_has(&world, committed, "save its part of the checkpoint");
}

// The checkpoint of `step`, as the run keeps its optimizer. Collective under ZeRO.
Status save_checkpoint(const planner::Model& model, const TrainOptions& options, const GptTraining& gpu, comm::Communicator* world,
                       const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step, int64_t data_position) {
  if (world != nullptr && gpu.sharded()) return save_sharded_checkpoint(model, options, gpu, *world, settings, run_id, step, data_position);
  return save_replicated_checkpoint(model, options, gpu, settings, run_id, step, data_position);
}

// --resume: every rank loads the checkpoint rank 0 verified (a CPU run's
// too, of any plugin and rank count) into its device, its shard of it under
// ZeRO, and continues its run id; the position to start from (step 0 without one).
Result<TrainingPosition> resume(const planner::Model& model, const TrainOptions& options, comm::Communicator* world, const std::vector<RunSetting>& settings,
                                GptTraining& gpu, std::string& run_id, std::ostream& progress) {
  auto checkpoint = agree_on_checkpoint(world, options, settings, progress);
  if (!checkpoint) return checkpoint.error();
  if (!checkpoint.value()) return TrainingPosition{};
  FlatAdamWState state = gpu.host_state(model);  // resume-time host memory, outside the training ledger
  auto loaded = load_flat_checkpoint(**checkpoint, model, state);
  if (Status s = every_rank_has(world, loaded, "load the checkpoint"); !s) return s.error();
  if (Status s = gpu.restore_state(state); !s) return s.error();
  if (!checkpoint.value()->manifest.run_id.empty()) run_id = checkpoint.value()->manifest.run_id;
  return loaded;
}

// Whether to stop before the next step (a signal, TrainOptions::stop_requested),
// agreed at step boundaries so that no rank abandons a step the others finish. Collective.
Result<bool> stop_agreed(const TrainOptions& options, comm::Communicator* world) {
  const bool stop = options.stop_requested && options.stop_requested();
  if (world == nullptr) return stop;
  auto go_on = all_ranks_agree(*world, !stop);
  if (!go_on) return go_on.error();
  return !go_on.value();
}

}  // namespace

Result<TrainMetrics> train_on_gpu(const planner::Model& model, const TrainOptions& options, const GpuRun& run, std::ostream& progress) {
  comm::Communicator* world = run.world != nullptr && run.world->size() > 1 ? run.world : nullptr;
  const int ranks = world != nullptr ? world->size() : 1, rank = world != nullptr ? world->rank() : 0;
  if (cudaError_t e = cudaSetDevice(run.device); e != cudaSuccess) {
    return make_error(ErrorCode::unsupported, "--gpu: CUDA device " + std::to_string(run.device) + " cannot be used: " + cudaGetErrorString(e));
  }
  TrainMetrics metrics;
  std::unique_ptr<comm::Communicator> group;
  if (world != nullptr) {
    auto made = data_parallel_group(run, metrics.ledger);
    if (Status s = every_rank_has(world, made, "join the NCCL communicator"); !s) return s.error();
    group = std::move(made).value();
  }
  auto data = load_training_data(options.data_path, model.config, options.micro_batch_size, options.seq_len);
  if (!data) return data.error();
  const std::vector<RunSetting> settings = run_settings(model, options, data.value(), ranks);
  auto made = GptTraining::create(model, metrics.ledger, options.micro_batch_size, options.seq_len, options.seed, options.optimizer,
                                  GpuDataParallel{group.get(), options.plugin}, options.recompute);
  if (Status s = every_rank_has(world, made, "set up its GPU step"); !s) return s.error();
  std::unique_ptr<GptTraining> gpu = std::move(made).value();

  std::string run_id = new_run_id();
  auto resumed = resume(model, options, world, settings, *gpu, run_id, progress);
  if (!resumed) return resumed.error();
  const TrainingPosition start = resumed.value();
  metrics.first_step = start.step + 1;
  metrics.checkpoint_step = start.step;

  DataLoader loader(data.value(), options.micro_batch_size, options.seq_len, start.data_position);
  // Each step: this rank's k micro-batches of the global batch of ranks · k · B sequences.
  const int64_t k = options.num_micro_batches, rank_tokens = k * options.micro_batch_size * options.seq_len, tokens_per_step = ranks * rank_tokens;
  std::vector<int32_t> tokens(static_cast<size_t>(rank_tokens)), targets(tokens.size());
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  for (int64_t step = metrics.first_step; step <= options.steps; ++step) {
    const int64_t step_start = loader.position();
    auto stop = stop_agreed(options, world);
    if (!stop) return stop.error();
    if (stop.value()) {  // the last complete step is committed, as the CPU trainer does
      metrics.stopped = true;
      if (step - 1 > metrics.checkpoint_step) {
        if (Status s = save_checkpoint(model, options, *gpu, world, settings, run_id, step - 1, step_start); !s) return s.error();
        metrics.checkpoint_step = step - 1;
      }
      break;
    }
    loader.read_rank_share(step_start, rank, ranks, k, tokens.data(), targets.data());
    const auto began = Clock::now();
    auto result = gpu->step(tokens.data(), targets.data(), k);
    if (!result) return result.error();
    double loss = result->loss;  // the mean over the ranks, as the CPU trainer reports it (rank-order sum)
    if (world != nullptr) {
      if (Status s = world->all_reduce(&loss, &loss, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
      loss /= static_cast<double>(ranks);
    }
    metrics.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - began).count());
    metrics.loss.push_back(loss);
    metrics.grad_norm.push_back(result->grad_norm);
    metrics.loss_scale.push_back(1.0);
    char line[160];
    std::snprintf(line, sizeof line, "step %lld/%lld: loss %.4f, grad norm %.4f%s\n", static_cast<long long>(step), static_cast<long long>(options.steps),
                  loss, result->grad_norm, result->updated ? "" : " (not finite: no update)");
    progress << line;
    if (step == options.steps || (options.save_every > 0 && step % options.save_every == 0)) {
      if (Status s = save_checkpoint(model, options, *gpu, world, settings, run_id, step, loader.position()); !s) return s.error();
      metrics.checkpoint_step = step;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const auto steps_run = static_cast<double>(metrics.loss.size());
  metrics.tokens_per_s = seconds > 0 ? static_cast<double>(tokens_per_step) * steps_run / seconds : 0;
  const planner::FlopsPerToken flops = planner::flops_per_token(model, options.seq_len, planner::RecomputeMode::none);
  metrics.achieved_flops_per_s = metrics.tokens_per_s * (flops.forward + flops.backward);
  gpu.reset();  // its memory back before the ledger's peaks are read
  if (group != nullptr) metrics.communication = group->counters();
  if (world != nullptr) {
    auto peaks = gather_rank_peaks(*world, metrics.ledger);
    if (!peaks) return peaks.error();
    metrics.ranks = std::move(peaks).value();
  }
  return metrics;
}

}  // namespace tessera::engine::cuda
