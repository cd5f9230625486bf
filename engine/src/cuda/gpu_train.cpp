// The GPU training loop, on one GPU or one per rank; see cuda/gpu_train.h.
#include "tessera/engine/cuda/gpu_train.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/cuda/gpt_training.h"
#include "tessera/engine/data.h"
#include "tessera/engine/consolidated_checkpoint.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/engine/parallel/rank_reports.h"
#include "tessera/engine/run_checkpoints.h"
#include "tessera/engine/sharded_checkpoint.h"
#include "tessera/planner/flops.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/tensor_parallel.h"
#if defined(TESSERA_HAVE_NCCL)
#include "tessera/engine/comm/nccl.h"
#endif

namespace tessera::engine::cuda {
namespace {

// An NCCL communicator over the ranks of `ranks` (one of the launcher's
// groups), on this rank's device; its reductions' scratch booked in `ledger` (comm_buffers).
Result<std::unique_ptr<comm::Communicator>> nccl_group(comm::Communicator& ranks, const GpuRun& run, MemoryLedger& ledger) {
#if defined(TESSERA_HAVE_NCCL)
  return comm::make_nccl_communicator(ranks, comm::NcclOptions{run.device, nullptr, run.comm_timeout, &ledger});
#else
  (void)ranks, (void)run, (void)ledger;
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

// Every rank copies its optimizer (laid out as `held`: its shard or part of
// the model) to the host and writes its part of the checkpoint of `step` with
// `write` into the directory rank 0 staged; rank 0 commits it with the files
// `whole_files` whose digests the manifest checks. Collective over `world`.
using WriteParts = std::function<Result<std::vector<CheckpointFile>>(const std::string& directory, FlatAdamWState& state, const TrainingPosition& position)>;
Status save_collective_checkpoint(const planner::Model& held, const TrainOptions& options, const GptTraining& gpu, comm::Communicator& world,
                                  const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step, int64_t data_position,
                                  const WriteParts& write, std::vector<std::string> whole_files) {
  RunDirectory* dir = options.run_directory;  // rank 0's
  FlatAdamWState state = gpu.host_state(held);  // save-time host memory, outside the training ledger
  const Status copied = gpu.save_state(state);
  auto staging = dir != nullptr ? dir->stage(step) : Result<CheckpointStaging>(CheckpointStaging{step, RunDirectory::staging_path(options.run_directory_path, step)});
  const Status ready = !copied ? copied : staging ? Status::success() : Status(staging.error());
  if (Status s = every_rank_has(&world, ready, "stage the checkpoint"); !s) return s;
  auto files = write(staging->directory, state, TrainingPosition{step, data_position, {}});
  Status committed = files ? Status::success() : Status(files.error());
  if (dir != nullptr && committed) {
    committed = commit_checkpoint_files(*dir, staging.value(), CheckpointManifest{step, run_id, std::move(files).value(), settings}, options.model_config_text,
                                        std::move(whole_files));
  }
  return every_rank_has(&world, committed, "save its part of the checkpoint");
}

// Under ZeRO every rank saves its shard, as the CPU engine's low_level_zero
// does (sharded_checkpoint.h: the same files, so either engine resumes the other's).
Status save_sharded_checkpoint(const planner::Model& model, const TrainOptions& options, const GptTraining& gpu, comm::Communicator& world,
                               const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step, int64_t data_position) {
  const WriteParts shards = [&](const std::string& directory, FlatAdamWState& state, const TrainingPosition& position) {
    return write_sharded_checkpoint(world, directory, model, state, options.plugin, planner::OptimizerKind::adamw, position);
  };
  return save_collective_checkpoint(model, options, gpu, world, settings, run_id, step, data_position, shards, {kModelFileName});
}

// The run's layout on the launcher's ranks: its groups (parallel/process_groups.h,
// MPI's, for checkpoints), this rank's pipeline stage and its part of the model.
struct GpuLayout {
  ProcessGroups host;
  planner::Model stage;  // the stage's tensors, whole (the model without a pipeline)
  planner::Model part;   // this rank's part of them (the stage without tensor parallelism)
  int64_t tp() const { return host.tensor != nullptr ? host.tensor->size() : 1; }
  int64_t pp() const { return host.pipeline != nullptr ? host.pipeline->size() : 1; }
};

// Under tensor or pipeline parallelism every rank holds its part of the
// model (under hybrid_parallel's ZeRO its shard of it): the checkpoint is the
// CPU engine's consolidated one (consolidated_checkpoint.h: whole tensors,
// the same files a CPU tp or pp run writes), gathered over the launcher's
// groups (the shards over the dp × cp ranks the optimizer shards over, as the
// CPU trainer's data group, by the plugin's layout; then the parts over tp
// and the stages over pp) and written by rank 0.
Status save_consolidated_checkpoint(const planner::Model& model, const GpuLayout& layout, const TrainOptions& options, const GptTraining& gpu,
                                    comm::Communicator& world, const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step,
                                    int64_t data_position) {
  const ProcessGroups& host = layout.host;
  comm::Communicator* pipeline = layout.pp() > 1 ? host.pipeline.get() : nullptr;
  const WriteParts consolidated = [&](const std::string& directory, FlatAdamWState& state, const TrainingPosition& position) {
    return write_consolidated_checkpoint({*host.data_context, *host.tensor, pipeline, world, options.model_chunks}, state, layout.part, layout.stage, model,
                                         options.plugin, planner::OptimizerKind::adamw, directory, position);
  };
  return save_collective_checkpoint(layout.part, options, gpu, world, settings, run_id, step, data_position, consolidated,
                                    {kModelFileName, kOptimizerFileName});
}

// The checkpoint of `step`, as the run keeps its optimizer. Collective under ZeRO, tensor and pipeline parallelism.
Status save_checkpoint(const planner::Model& model, const GpuLayout& layout, const TrainOptions& options, const GptTraining& gpu, comm::Communicator* world,
                       const std::vector<RunSetting>& settings, const std::string& run_id, int64_t step, int64_t data_position) {
  if (world != nullptr && (layout.tp() > 1 || layout.pp() > 1)) {
    return save_consolidated_checkpoint(model, layout, options, gpu, *world, settings, run_id, step, data_position);
  }
  if (world != nullptr && gpu.sharded()) return save_sharded_checkpoint(model, options, gpu, *world, settings, run_id, step, data_position);
  return save_replicated_checkpoint(model, options, gpu, settings, run_id, step, data_position);
}

// --resume: every rank loads the checkpoint rank 0 verified (a CPU run's
// too, of any plugin and rank count) into its device, its shard of it under
// ZeRO, its tensor-parallel part of its pipeline stage's tensors, and continues its run id; the
// position to start from (step 0 without one).
Result<TrainingPosition> resume(const GpuLayout& layout, const TrainOptions& options, comm::Communicator* world,
                                const std::vector<RunSetting>& settings, GptTraining& gpu, std::string& run_id, std::ostream& progress) {
  auto checkpoint = agree_on_checkpoint(world, options, settings, progress);
  if (!checkpoint) return checkpoint.error();
  if (!checkpoint.value()) return TrainingPosition{};
  FlatAdamWState state = gpu.host_state(layout.part);  // resume-time host memory, outside the training ledger
  const TensorParallelRank tp{layout.tp(), layout.tp() > 1 ? layout.host.tensor->rank() : 0};
  auto loaded = load_flat_checkpoint(**checkpoint, layout.stage, state, tp);
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
  const int ranks = world != nullptr ? world->size() : 1;
  if (cudaError_t e = cudaSetDevice(run.device); e != cudaSuccess) {
    return make_error(ErrorCode::unsupported, "--gpu: CUDA device " + std::to_string(run.device) + " cannot be used: " + cudaGetErrorString(e));
  }
  TrainMetrics metrics;
  // The launcher's ranks as dp × tp × pp × cp (tensor-parallel ranks fastest,
  // then context, process_groups.h), and NCCL over each group of more than
  // one rank; gradients are reduced over the dp × cp ranks (data_context: the data group without context parallelism).
  const int64_t tp = run.tp, pp = run.pp, cp = run.cp;
  if (ranks % (tp * pp * cp) != 0) {
    return make_error(ErrorCode::invalid_argument, "--tp " + std::to_string(tp) + " × --pp " + std::to_string(pp) + " × --cp " + std::to_string(cp) +
                                                       " does not divide the " + std::to_string(ranks) + " ranks; launch a multiple of it");
  }
  const int64_t dp = ranks / (tp * pp * cp);
  GpuLayout layout{{}, model, planner::tp_rank_model(model, tp)};
  std::unique_ptr<comm::Communicator> group, tensor_group, pipeline_group, context_group;
  planner::ContextSplit split;
  if (world != nullptr) {
    auto host = make_process_groups(*world, planner::ParallelLayout{dp, tp, pp, false, cp});
    if (!host) return host.error();
    layout.host = std::move(host).value();
    layout.stage = planner::stage_model(model, planner::PipelinePlacement{pp, layout.host.coordinates.pp_rank, options.model_chunks});
    layout.part = planner::tp_rank_model(layout.stage, tp);
    split = planner::ContextSplit{cp, layout.host.coordinates.cp_rank};
    for (auto [ranks_of, made_group] : {std::pair{layout.host.data_context.get(), &group}, std::pair{layout.host.tensor.get(), &tensor_group},
                                        std::pair{layout.host.pipeline.get(), &pipeline_group}, std::pair{layout.host.context.get(), &context_group}}) {
      if (ranks_of->size() == 1) continue;  // every group of a kind has the same size: every rank skips it or joins
      auto made = nccl_group(*ranks_of, run, metrics.ledger);
      if (Status s = every_rank_has(world, made, "join the NCCL communicator"); !s) return s.error();
      *made_group = std::move(made).value();
    }
  }
  const int dp_rank = world != nullptr ? static_cast<int>(layout.host.coordinates.dp_rank) : 0;
  auto data = load_training_data(options.data_path, model.config, options.micro_batch_size, options.seq_len);
  if (!data) return data.error();
  const std::vector<RunSetting> settings = run_settings(model, options, data.value(), dp);  // the global batch: dp ranks' sequences
  auto made = GptTraining::create(model, metrics.ledger, options.micro_batch_size, options.seq_len, options.seed, options.optimizer,
                                  GpuDataParallel{group.get(), options.plugin, options.gemini_parameter_chunks_on_host},
                                  planner::BlockRecompute{options.recompute, options.recompute_num_layers},
                                  GpuTensorParallel{tensor_group.get(), options.sequence_parallel, options.plugin.tp_comm_overlap},
                                  GpuPipelineParallel{pipeline_group.get(), options.pipeline_schedule, options.model_chunks}, options.device_capacity_bytes,
                                  GpuContextParallel{context_group.get()});
  if (Status s = every_rank_has(world, made, "set up its GPU step"); !s) return s.error();
  std::unique_ptr<GptTraining> gpu = std::move(made).value();

  std::string run_id = new_run_id();
  auto resumed = resume(layout, options, world, settings, *gpu, run_id, progress);
  if (!resumed) return resumed.error();
  const TrainingPosition start = resumed.value();
  metrics.first_step = start.step + 1;
  metrics.checkpoint_step = start.step;

  DataLoader loader(data.value(), options.micro_batch_size, options.seq_len, start.data_position);
  // Each step: this rank's k micro-batches of the global batch of dp · k · B
  // sequences (the tensor- and context-parallel ranks of a data-parallel rank
  // read the same; a context rank keeps its chunks of each, as the CPU trainer).
  const int64_t k = options.num_micro_batches, rank_tokens = k * options.micro_batch_size * options.seq_len, tokens_per_step = dp * rank_tokens;
  std::vector<int32_t> tokens(static_cast<size_t>(rank_tokens)), targets(tokens.size());
  std::vector<int32_t> local_tokens(static_cast<size_t>(rank_tokens / cp)), local_targets(local_tokens.size());
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  for (int64_t step = metrics.first_step; step <= options.steps; ++step) {
    const int64_t step_start = loader.position();
    auto stop = stop_agreed(options, world);
    if (!stop) return stop.error();
    if (stop.value()) {  // the last complete step is committed, as the CPU trainer does
      metrics.stopped = true;
      if (step - 1 > metrics.checkpoint_step) {
        if (Status s = save_checkpoint(model, layout, options, *gpu, world, settings, run_id, step - 1, step_start); !s) return s.error();
        metrics.checkpoint_step = step - 1;
      }
      break;
    }
    loader.read_rank_share(step_start, dp_rank, static_cast<int>(dp), k, tokens.data(), targets.data());
    if (cp > 1) {
      take_context_chunks(local_tokens.data(), tokens.data(), k * options.micro_batch_size, options.seq_len, split);
      take_context_chunks(local_targets.data(), targets.data(), k * options.micro_batch_size, options.seq_len, split);
    }
    const auto began = Clock::now();
    auto result = cp > 1 ? gpu->step(local_tokens.data(), local_targets.data(), k) : gpu->step(tokens.data(), targets.data(), k);
    if (!result) return result.error();
    // The mean over the ranks, as the CPU trainer reports it (rank-order sum; a tp group's ranks have the same, a pipeline's last stage alone has it).
    double loss = result->loss;
    if (world != nullptr) {
      if (Status s = world->all_reduce(&loss, &loss, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
      loss /= static_cast<double>(ranks / pp);
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
      if (Status s = save_checkpoint(model, layout, options, *gpu, world, settings, run_id, step, loader.position()); !s) return s.error();
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
  if (tensor_group != nullptr) metrics.tensor_parallel_communication = tensor_group->counters();
  if (pipeline_group != nullptr) metrics.pipeline_parallel_communication = pipeline_group->counters();
  if (context_group != nullptr) metrics.context_parallel_communication = context_group->counters();
  if (world != nullptr) {
    auto peaks = gather_rank_peaks(*world, metrics.ledger);
    if (!peaks) return peaks.error();
    metrics.ranks = std::move(peaks).value();
  }
  return metrics;
}

}  // namespace tessera::engine::cuda
