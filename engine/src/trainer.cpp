#include "tessera/engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <iostream>
#include <ostream>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/comm/local.h"
#include "tessera/engine/consolidated_checkpoint.h"
#include "tessera/engine/data.h"
#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/parallel/pipeline.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/run_checkpoints.h"
#include "tessera/engine/sharded_checkpoint.h"
#include "tessera/planner/flops.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {
namespace {

using Clock = std::chrono::steady_clock;

int group_size(const comm::Communicator* group) { return group != nullptr ? group->size() : 1; }

// This rank's pipeline stage (the whole model without a pipeline).
planner::PipelinePlacement placement_of(const TrainOptions& o) {
  const comm::Communicator* pipeline = o.pipeline_parallel_group;
  if (group_size(pipeline) == 1) return {};
  return planner::PipelinePlacement{pipeline->size(), pipeline->rank(), o.model_chunks};
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

// One run of the training loop for parameters stored as T (float, bf16 or fp16).
template <typename T>
class TrainingRun {
 public:
  using W = compute_t<T>;

  TrainingRun(const planner::Model& model, const TrainOptions& o, const TokenDataset& data, std::ostream& progress, bool terminal)
      : model_(model), o_(o), data_(data), progress_(progress), terminal_(terminal),
        settings_(run_settings(model, o, data, group_size(o.data_parallel_group) / group_size(o.context_parallel_group))),
        placement_(placement_of(o)), stage_model_(planner::stage_model(model, placement_)),
        local_model_(planner::tp_rank_model(stage_model_, group_size(o.tensor_parallel_group))),
        own_group_(o.data_parallel_group == nullptr ? comm::make_local_communicator() : nullptr),
        group_(o.data_parallel_group != nullptr ? *o.data_parallel_group : *own_group_),
        world_(o.world_group != nullptr ? *o.world_group : group_),
        tensor_group_(group_size(o.tensor_parallel_group) > 1 ? o.tensor_parallel_group : nullptr),
        pipeline_group_(group_size(o.pipeline_parallel_group) > 1 ? o.pipeline_parallel_group : nullptr),
        context_(group_size(o.context_parallel_group) > 1 ? o.context_parallel_group : nullptr) {
    if (o.dry_run) metrics_.ledger = MemoryLedger::dry_run();
    metrics_.ledger.set_capacity(MemorySpace::device, o.dry_run ? 0 : o.device_capacity_bytes);
  }
  ~TrainingRun() {  // the communicators outlive the run and its timeline
    group_.record_into(nullptr, TimelineLane::data_parallel);
    if (tensor_group_ != nullptr) tensor_group_->record_into(nullptr, TimelineLane::tensor_parallel);
    if (pipeline_group_ != nullptr) pipeline_group_->record_into(nullptr, TimelineLane::pipeline_parallel);
    if (context_.size() > 1) o_.context_parallel_group->record_into(nullptr, TimelineLane::context_parallel);
  }
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Builds the model and optimizer and restores the checkpoint, if resuming.
  Status prepare();
  Result<TrainMetrics> run();
  // The dry run's step: every micro-batch's unit hooks, nothing computed.
  TrainMetrics replay_step();

 private:
  Status resume_from_checkpoint();
  bool stop_requested() const { return o_.stop_requested && o_.stop_requested(); }
  // This rank's part of every tensor under tensor parallelism.
  TensorParallelRank tensor_parallel_rank() const {
    return tensor_group_ != nullptr ? TensorParallelRank{tensor_group_->size(), tensor_group_->rank()} : TensorParallelRank{};
  }
  // Whether a checkpoint is every rank's optimizer shard files (a sharded
  // data-parallel run); a tensor- or pipeline-parallel run's is consolidated instead.
  bool consolidates() const { return tensor_group_ != nullptr || pipeline_group_ != nullptr; }
  bool saves_shard_files() const { return !consolidates() && group_.size() > 1 && parallel_->sharded(); }
  bool weights_finite();
  Status save(int64_t step, int64_t data_position);
  Status commit_checkpoint(int64_t step, int64_t data_position);
  Status commit_files(RunDirectory& dir, const CheckpointStaging& staging, std::vector<CheckpointFile> files, int64_t step);
  Result<bool> all_ranks(bool ok) { return all_ranks_agree(*control_, ok); }
  // Whether this run checkpoints: rank 0 holds the run directory, the other ranks its path.
  bool saves() const { return o_.run_directory != nullptr || !o_.run_directory_path.empty(); }
  Error diverged(const std::string& what, int64_t step, int64_t position_before);
  Result<std::optional<double>> accumulate_gradients(double loss_scale);
  // The step's micro-batches through this pipeline stage; the mean loss where the stage holds the head.
  Result<double> run_pipeline(double loss_scale);
  Status check_pipeline() const;
  // Sums the tied embedding's gradient with its copy's on the other end of the pipeline.
  Status sum_tied_embedding_gradients();
  OptimizerShard& optimizer() { return parallel_->optimizer(); }
  // Tokens of one step over all ranks: the context ranks of a data-parallel rank share its sequences.
  int64_t tokens_per_step() const { return group_.size() / context_.size() * o_.num_micro_batches * o_.micro_batch_size * o_.seq_len; }
  // Reads the next micro-batch into tokens, targets (this rank's chunks of it under context parallelism).
  void next_micro_batch(int32_t* tokens, int32_t* targets);

  const planner::Model& model_;
  const TrainOptions& o_;
  const TokenDataset& data_;
  std::ostream& progress_;
  const bool terminal_;
  const std::vector<RunSetting> settings_;
  TrainMetrics metrics_;
  const planner::PipelinePlacement placement_;
  const planner::Model stage_model_;  // the tensors of this rank's pipeline stage, whole (the model without a pipeline)
  // What this rank holds of the model: all of it, or its tensor-parallel part
  // of its stage, which data parallelism shards (the plugins see this one).
  const planner::Model local_model_;
  std::unique_ptr<comm::Communicator> own_group_;  // one rank, when no group was given
  comm::Communicator& group_;                      // data parallelism
  comm::Communicator& world_;                      // every rank of the run
  comm::Communicator* tensor_group_;               // null without tensor parallelism
  comm::Communicator* pipeline_group_;             // null without pipeline parallelism
  const ContextParallel context_;                  // which chunks of each sequence this rank keeps
  // The first and the last stage, which both hold the tied embedding (null: none here).
  std::unique_ptr<comm::Communicator> embedding_group_;
  std::unique_ptr<comm::Communicator> own_tensor_group_;  // one rank, for a pipeline's checkpoints without tensor parallelism
  // The ranks' bookkeeping (the loss, stop and save agreements, memory peaks)
  // on a communicator of its own, so that group_'s counters hold the training's traffic only.
  std::unique_ptr<comm::Communicator> control_;
  comm::CommCounters counted_before_;  // group_'s counters when the run began
  comm::CommCounters tensor_counted_before_;  // tensor_group_'s
  comm::CommCounters pipeline_counted_before_;  // pipeline_group_'s
  comm::CommCounters context_counted_before_;  // o_.context_parallel_group's
  std::optional<Transformer<T>> net_;
  std::optional<PipelineStage<T>> pipeline_;
  std::unique_ptr<ParallelStrategy<T>> parallel_;
  // fp16 overflows above 65504 and underflows below 2^-24: its gradients need loss scaling.
  std::optional<DynamicLossScaler> scaler_;
  std::optional<DataLoader> loader_;
  TrainingPosition start_;
  std::string run_id_ = new_run_id();
  int64_t start_of_step_ = 0;  // the data position of the step in progress
  int64_t committed_step_ = 0;
  Clock::time_point started_ = Clock::now();
  std::vector<int32_t> tokens_, targets_;  // the micro-batch this rank computes
  std::vector<int32_t> whole_tokens_, whole_targets_;  // its whole sequences, under context parallelism
  std::vector<std::vector<int32_t>> step_tokens_, step_targets_;  // a pipeline's micro-batches of the step
  Timeline timeline_;  // this rank's last step
};

template <typename T>
Status TrainingRun<T>::prepare() {
  if (Status s = check_data_parallel_supported(o_.plugin, o_.precision, local_model_, group_.size()); !s) return s;
  if (consolidates() && o_.world_group == nullptr && !o_.dry_run) {
    return make_error(ErrorCode::invalid_argument,
                      "tensor and pipeline parallelism need TrainOptions::world_group (every rank of the run), where the ranks agree and save");
  }
  if (tensor_group_ != nullptr && o_.plugin.kind != planner::PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::invalid_argument, "--tp " + std::to_string(tensor_group_->size()) + ": tensor parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  }
  if (pipeline_group_ != nullptr) {
    if (Status s = check_pipeline(); !s) return s;
  }
  if (context_.size() > 1 && o_.plugin.kind != planner::PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::invalid_argument, "--cp " + std::to_string(context_.size()) + ": context parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  }
  auto control = world_.split(0, world_.rank(), "control");
  if (!control) return control.error();
  control_ = std::move(control).value();
  if (pipeline_group_ != nullptr) {
    // Every stage takes part in the split; the middle ones form a group they never use.
    auto embedding = pipeline_group_->split(placement_.first() || placement_.last() ? 0 : 1, pipeline_group_->rank(), "embedding");
    if (!embedding) return embedding.error();
    embedding_group_ = std::move(embedding).value();
    if (tensor_group_ == nullptr) own_tensor_group_ = comm::make_local_communicator("tp");
  }
  counted_before_ = group_.counters();
  if (tensor_group_ != nullptr) tensor_counted_before_ = tensor_group_->counters();
  if (pipeline_group_ != nullptr) pipeline_counted_before_ = pipeline_group_->counters();
  if (context_.size() > 1) context_counted_before_ = o_.context_parallel_group->counters();
  if (!o_.dry_run) {
    group_.record_into(&timeline_, TimelineLane::data_parallel);
    if (tensor_group_ != nullptr) tensor_group_->record_into(&timeline_, TimelineLane::tensor_parallel);
    if (pipeline_group_ != nullptr) pipeline_group_->record_into(&timeline_, TimelineLane::pipeline_parallel);
    if (context_.size() > 1) o_.context_parallel_group->record_into(&timeline_, TimelineLane::context_parallel);
  }
  parallel_ = make_parallel_strategy<T>(group_, o_.plugin, local_model_, o_.gemini_parameter_chunks_on_host);
  parallel_->set_model_parallel(tensor_group_, pipeline_group_, planner::counted_in_gradient_norm(local_model_, tensor_group_ != nullptr ? tensor_group_->rank() : 0));
  auto created = Transformer<T>::create(model_, metrics_.ledger, o_.micro_batch_size, o_.seq_len / context_.size(), o_.seed, planner::BlockRecompute{o_.recompute, o_.recompute_num_layers}, parallel_->storage(),
                                        o_.tensor_parallel_group, o_.sequence_parallel, placement_, o_.context_parallel_group,
                                        o_.plugin.tp_comm_overlap ? TpCommunication::overlapped : TpCommunication::collectives);
  if (!created) return created.error();
  net_.emplace(std::move(created).value());
  if (pipeline_group_ != nullptr) pipeline_.emplace(*net_, *pipeline_group_, metrics_.ledger, o_.pipeline_schedule, o_.num_micro_batches);
  if (Status s = parallel_->attach(metrics_.ledger, *net_, decay_mask(net_->parameter_shapes()), o_.optimizer); !s) return s;
  parallel_->initialize(local_model_, o_.seed);
  if (o_.precision == planner::Precision::fp16) scaler_.emplace(o_.loss_scaler);
  if (!o_.dry_run) {
    if (Status s = resume_from_checkpoint(); !s) return s;
  }
  if (scaler_ && start_.loss_scaler.scale > 0) scaler_->restore(start_.loss_scaler);
  loader_.emplace(data_, o_.micro_batch_size, o_.seq_len, start_.data_position);
  metrics_.first_step = start_.step + 1;
  committed_step_ = metrics_.checkpoint_step = start_.step;
  tokens_.resize(static_cast<size_t>(o_.micro_batch_size * o_.seq_len / context_.size()));
  targets_.resize(tokens_.size());
  if (context_.size() > 1) {
    whole_tokens_.resize(static_cast<size_t>(o_.micro_batch_size * o_.seq_len));
    whole_targets_.resize(whole_tokens_.size());
  }
  return Status::success();
}

template <typename T>
void TrainingRun<T>::next_micro_batch(int32_t* tokens, int32_t* targets) {
  if (context_.size() == 1) return loader_->next(tokens, targets);
  loader_->next(whole_tokens_.data(), whole_targets_.data());
  take_context_chunks(tokens, whole_tokens_.data(), o_.micro_batch_size, o_.seq_len, context_.split());
  take_context_chunks(targets, whole_targets_.data(), o_.micro_batch_size, o_.seq_len, context_.split());
}

// Collective: rank 0's decision goes to every rank, then each rank loads what it holds.
template <typename T>
Status TrainingRun<T>::resume_from_checkpoint() {
  auto agreed = agree_on_checkpoint(world_.size() > 1 ? control_.get() : nullptr, o_, settings_, progress_);
  if (!agreed) return agreed.error();
  const std::optional<CommittedCheckpoint>& checkpoint = agreed.value();
  if (!checkpoint) return Status::success();
  auto position = load_checkpoint(*checkpoint, stage_model_, *net_, optimizer(), o_.optimizer.kind, tensor_parallel_rank());
  auto loaded = all_ranks(position.ok());
  if (!loaded) return loaded.error();
  if (!position) return position.error();
  if (!loaded.value()) return make_error(ErrorCode::invalid_argument, "--resume: another rank could not load its part of the checkpoint (its message says why)");
  if (Status s = parallel_->weights_restored(); !s) return s;
  start_ = position.value();
  if (!checkpoint->manifest.run_id.empty()) run_id_ = checkpoint->manifest.run_id;
  return Status::success();
}

// The full-precision weights of this rank's shard (all of them, unsharded).
template <typename T>
bool TrainingRun<T>::weights_finite() {
  const float* w = optimizer().weights();
  for (const planner::ShardPiece& piece : optimizer().pieces()) {
    for (int64_t i = piece.offset_in_shard; i < piece.offset_in_shard + piece.numel; ++i) {
      if (!std::isfinite(static_cast<double>(w[i]))) return false;
    }
  }
  return true;
}

// Checkpoint and metrics so far: what a NaN, a signal or a crash later leaves
// behind. On several ranks every rank calls it at the same steps: the memory
// peaks are gathered and a sharded optimizer is saved by every rank.
template <typename T>
Status TrainingRun<T>::save(int64_t step, int64_t data_position) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
  const auto steps_run = static_cast<double>(metrics_.loss.size());
  const auto tokens_per_step = static_cast<double>(this->tokens_per_step());
  const planner::FlopsPerToken flops = planner::flops_per_token(model_, o_.seq_len, planner::RecomputeMode::none);
  metrics_.tokens_per_s = steps_run > 0 ? tokens_per_step * steps_run / elapsed : 0.0;
  metrics_.achieved_flops_per_s = metrics_.tokens_per_s * (flops.forward + flops.backward);
  metrics_.communication = group_.counters().since(counted_before_);
  if (tensor_group_ != nullptr) metrics_.tensor_parallel_communication = tensor_group_->counters().since(tensor_counted_before_);
  if (pipeline_group_ != nullptr) metrics_.pipeline_parallel_communication = pipeline_group_->counters().since(pipeline_counted_before_);
  if (context_.size() > 1) metrics_.context_parallel_communication = o_.context_parallel_group->counters().since(context_counted_before_);
  metrics_.chunk_moves = parallel_->chunk_moves();
  if (!saves()) return Status::success();
  auto peaks = gather_rank_peaks(*control_, metrics_.ledger);
  if (!peaks) return peaks.error();
  metrics_.ranks = std::move(peaks).value();
  auto timelines = gather_timelines(*control_, timeline_);
  if (!timelines) return timelines.error();
  metrics_.timelines = std::move(timelines).value();
  if (step > committed_step_) {
    if (Status s = commit_checkpoint(step, data_position); !s) return s;
  }
  if (o_.run_directory == nullptr) return Status::success();  // rank 0 writes the metrics
  return o_.on_save ? o_.on_save(metrics_) : Status::success();
}

template <typename T>
Status TrainingRun<T>::commit_checkpoint(int64_t step, int64_t data_position) {
  auto finite = all_ranks(weights_finite());
  if (!finite) return finite.error();
  if (!finite.value()) {
    return make_error(ErrorCode::invalid_argument, "the weights are not finite after step " + std::to_string(step) + "; the checkpoint at step " +
                                                       std::to_string(committed_step_) + " is kept; lower --lr");
  }
  const bool sharded = saves_shard_files();
  const bool consolidated = consolidates();
  const bool collective = sharded || consolidated;  // every rank takes part in the save
  if (group_.size() > 1 && !collective && group_.rank() != 0) {  // replicated: rank 0 saves everything
    committed_step_ = metrics_.checkpoint_step = step;
    return Status::success();
  }
  RunDirectory* dir = o_.run_directory;
  Result<CheckpointStaging> staging = dir != nullptr ? dir->stage(step) : Result<CheckpointStaging>(CheckpointStaging{step, ""});
  const std::string rank0_failed = "rank 0 could not save the checkpoint of step " + std::to_string(step) + " (its message says why)";
  if (collective) {
    auto staged = all_ranks(staging.ok());
    if (!staged) return staged.error();
    if (!staged.value()) return staging.ok() ? make_error(ErrorCode::io_error, rank0_failed) : staging.error();
    if (dir == nullptr) staging = CheckpointStaging{step, RunDirectory::staging_path(o_.run_directory_path, step)};
  }
  if (!staging) return staging.error();
  const TrainingPosition position{step, data_position, scaler_ ? scaler_->state() : LossScalerState{}};
  Result<std::vector<CheckpointFile>> files = std::vector<CheckpointFile>{};
  if (consolidated) {
    comm::Communicator& tensor = tensor_group_ != nullptr ? *tensor_group_ : *own_tensor_group_;
    files = write_consolidated_checkpoint({group_, tensor, pipeline_group_, world_, placement_.chunks}, optimizer(), local_model_, stage_model_, model_, o_.plugin,
                                          o_.optimizer.kind, staging->directory, position);
  } else if (sharded) {
    files = write_sharded_checkpoint(group_, staging->directory, model_, optimizer(), o_.plugin, o_.optimizer.kind, position);
  } else {
    files = write_checkpoint_files(staging->directory, *net_, optimizer(), o_.optimizer.kind, position);
  }
  Status committed = files.ok() ? Status::success() : Status(files.error());
  if (dir != nullptr && committed) committed = commit_files(*dir, staging.value(), std::move(files).value(), step);
  if (collective) {
    auto everywhere = all_ranks(committed.ok());
    if (!everywhere) return everywhere.error();
    if (!everywhere.value()) return committed.ok() ? make_error(ErrorCode::io_error, rank0_failed) : committed;
  }
  if (!committed) return committed;
  committed_step_ = metrics_.checkpoint_step = step;
  return Status::success();
}

// Rank 0: the manifest over `files` (and config.json), then the commit.
template <typename T>
Status TrainingRun<T>::commit_files(RunDirectory& dir, const CheckpointStaging& staging, std::vector<CheckpointFile> files, int64_t step) {
  const bool sharded = saves_shard_files();
  return commit_checkpoint_files(dir, staging, CheckpointManifest{step, run_id_, std::move(files), settings_}, o_.model_config_text,
                                 sharded ? std::vector<std::string>{kModelFileName} : std::vector<std::string>{kModelFileName, kOptimizerFileName});
}

// A step whose loss or gradients are not finite: the optimizer has not
// stepped, so the weights are those after the last good step. Commit them if
// they are finite; an earlier finite checkpoint is never replaced by a poisoned one.
template <typename T>
Error TrainingRun<T>::diverged(const std::string& what, int64_t step, int64_t position_before) {
  std::string kept;
  if (saves() && step - 1 > committed_step_) {
    if (Status s = save(step - 1, position_before); !s) kept = " (" + s.error().message + ")";
  }
  const std::string checkpoint = committed_step_ > 0 ? "the checkpoint holds step " + std::to_string(committed_step_) + ", the last with finite weights"
                                                     : "no checkpoint was saved";
  return make_error(ErrorCode::invalid_argument, what + " at step " + std::to_string(step) + "; " + checkpoint + kept + "; lower --lr");
}

// Forward and backward over this rank's micro-batches of the step, then the
// gradients reduced over the ranks; an error when stopped. Each rank reads
// its share of the step's global batch (rank_share_position). Returns the mean loss over all ranks; nullopt when a stop was requested.
template <typename T>
Result<std::optional<double>> TrainingRun<T>::accumulate_gradients(double loss_scale) {
  parallel_->zero_gradients();
  const int64_t k = o_.num_micro_batches, sequence_tokens = o_.micro_batch_size * o_.seq_len;
  // The data-parallel rank: the group's ranks ascend as cp_rank + cp · dp_rank (planner::data_context_rank).
  loader_->seek(rank_share_position(start_of_step_, group_.rank() / static_cast<int>(context_.size()), k, sequence_tokens));
  double loss = 0;
  if (pipeline_group_ != nullptr) {
    auto stage_loss = run_pipeline(loss_scale);
    if (!stage_loss) return stage_loss.error();
    loss = stage_loss.value();
  }
  // Under sequence parallelism the norms' gradients are partial sums until
  // reduced over the tensor-parallel group after the last backward, so data
  // parallelism starts no reduction inside backward.
  const bool sequence_parallel = tensor_group_ != nullptr && o_.sequence_parallel;
  for (int64_t micro = 0; micro < k && pipeline_group_ == nullptr; ++micro) {
    // On several ranks the stop is agreed at step boundaries (run()), so that no rank abandons a step the others finish.
    if (world_.size() == 1 && stop_requested()) return std::optional<double>();
    next_micro_batch(tokens_.data(), targets_.data());
    const auto forward_start = Timeline::Clock::now();
    loss = add_micro_batch_loss(loss, net_->forward(tokens_.data(), targets_.data()), k);
    const auto backward_start = Timeline::Clock::now();
    timeline_.record(TimelineKind::forward, TimelineLane::compute, forward_start, backward_start, micro);
    // k micro-batches of b on each of n ranks = one batch of n·k·b (gradient_accumulation.h).
    parallel_->prepare_backward(reduces_in_backward(micro, k) && !sequence_parallel);
    net_->backward(static_cast<W>(micro_batch_gradient_scale(loss_scale, k, parallel_->ranks())));
    timeline_.record(TimelineKind::backward, TimelineLane::compute, backward_start, Timeline::Clock::now(), micro);
  }
  if (sequence_parallel) net_->reduce_sequence_parallel_gradients();
  if (!net_->communication_status().ok()) return net_->communication_status().error();
  loader_->seek(start_of_step_ + tokens_per_step());
  const auto reduction_start = Timeline::Clock::now();
  if (Status s = parallel_->reduce_gradients(); !s) return s.error();
  timeline_.record(TimelineKind::gradient_reduction, TimelineLane::compute, reduction_start, Timeline::Clock::now());
  // Every rank of a tensor-parallel group computed the same loss, and only the
  // last stage of a pipeline computes it: the mean over the data-parallel
  // ranks. A context rank's is the mean over its equal share of the tokens,
  // so the context ranks' mean is their sequences'.
  if (world_.size() > 1) {
    if (Status s = control_->all_reduce(&loss, &loss, 1, comm::DataType::f64, comm::ReduceOp::sum); !s) return s.error();
    loss /= static_cast<double>(world_.size() / group_size(pipeline_group_));
  }
  return std::optional<double>(loss);
}

// The step's micro-batches of this data-parallel rank are read first (every
// stage reads them: the first needs the tokens, the last the targets); the
// stage runs its schedule; data parallelism reduces after the whole step, as
// the gradients of a stage are complete only after its last backward.
template <typename T>
Result<double> TrainingRun<T>::run_pipeline(double loss_scale) {
  const auto k = static_cast<size_t>(o_.num_micro_batches);
  step_tokens_.resize(k);
  step_targets_.resize(k);
  for (size_t m = 0; m < k; ++m) {
    step_tokens_[m].resize(tokens_.size());
    step_targets_[m].resize(targets_.size());
    next_micro_batch(step_tokens_[m].data(), step_targets_[m].data());
  }
  parallel_->prepare_backward(false);
  const auto scale = static_cast<W>(micro_batch_gradient_scale(loss_scale, static_cast<int64_t>(k), parallel_->ranks()));
  auto loss = pipeline_->run_step(step_tokens_, step_targets_, scale, timeline_);
  if (!loss) return loss.error();
  if (Status s = sum_tied_embedding_gradients(); !s) return s.error();
  return loss;
}

// Megatron-LM all-reduces the word embeddings' gradients between the first
// and the last stage after backward (finalize_model_grads.py,
// _allreduce_word_embedding_grads), so both copies take the same step.
template <typename T>
Status TrainingRun<T>::sum_tied_embedding_gradients() {
  const Slice<T> gradient = net_->tied_embedding_gradient();
  if (gradient.numel() == 0) return Status::success();
  return embedding_group_->all_reduce(gradient.data(), gradient.data(), static_cast<size_t>(gradient.numel()), comm::ReduceOp::sum);
}

// What the engine's pipeline runs: hybrid_parallel's stages, with the
// schedule's micro-batch rules (the planner offers no other plans).
template <typename T>
Status TrainingRun<T>::check_pipeline() const {
  const std::string pp = "--pp " + std::to_string(pipeline_group_->size());
  if (o_.plugin.kind != planner::PluginKind::hybrid_parallel) {
    return make_error(ErrorCode::invalid_argument, pp + ": pipeline parallelism is hybrid_parallel's; use --plugin hybrid_parallel");
  }
  if (o_.plugin.effective_zero_stage() >= 2) {
    return make_error(ErrorCode::invalid_argument, pp + ": ZeRO-2 shards the gradients that a pipeline accumulates over its micro-batches; use --zero-stage 1");
  }
  const bool interleaved = o_.model_chunks > 1;
  if (interleaved != (o_.pipeline_schedule == planner::PipelineSchedule::interleaved)) {
    return make_error(ErrorCode::invalid_argument, pp + ": the interleaved schedule runs 2 or more model chunks per stage, the others one");
  }
  if (interleaved && o_.num_micro_batches % pipeline_group_->size() != 0) {
    return make_error(ErrorCode::invalid_argument, pp + ": the interleaved schedule runs the micro-batches in groups of pp; make the micro-batches per step (" +
                                                       std::to_string(o_.num_micro_batches) + ") a multiple of " + std::to_string(pipeline_group_->size()));
  }
  return Status::success();
}

template <typename T>
Result<TrainMetrics> TrainingRun<T>::run() {
  if (metrics_.first_step > o_.steps) return std::move(metrics_);  // the checkpoint is at --steps already: nothing to do
  const auto tokens_per_step = static_cast<double>(this->tokens_per_step());
  started_ = Clock::now();
  for (int64_t step = metrics_.first_step; step <= o_.steps; ++step) {
    const auto step_start = Clock::now();
    const int64_t position_before = start_of_step_ = loader_->position();
    const double loss_scale = scaler_ ? scaler_->scale() : 1.0;
    auto stop = world_.size() > 1 ? all_ranks(!stop_requested()) : Result<bool>(true);
    if (!stop) return stop.error();
    timeline_.begin_step();
    auto loss = stop.value() ? accumulate_gradients(loss_scale) : Result<std::optional<double>>(std::optional<double>());
    if (!loss) return loss.error();
    if (!loss.value()) {  // a stop was requested: the step is abandoned, the last complete one saved
      metrics_.stopped = true;
      if (Status s = save(step - 1, position_before); !s) return s.error();
      return std::move(metrics_);
    }
    if (!std::isfinite(*loss.value())) return diverged("loss is " + std::to_string(*loss.value()), step, position_before);
    const auto optimizer_start = Timeline::Clock::now();
    auto stepped = parallel_->step(loss_scale);
    if (!stepped) return stepped.error();
    timeline_.record(TimelineKind::optimizer_step, TimelineLane::compute, optimizer_start, Timeline::Clock::now());
    const std::optional<double> grad_norm = stepped.value();
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
    metrics_.loss.push_back(*loss.value());
    metrics_.step_time_s.push_back(std::chrono::duration<double>(Clock::now() - step_start).count());
    if (o_.save_every > 0 && step % o_.save_every == 0 && step < o_.steps) {
      if (Status s = save(step, loader_->position()); !s) return s.error();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    if (terminal_ || step % o_.log_every == 0 || step == o_.steps) {
      const double done = static_cast<double>(step - metrics_.first_step + 1);
      report(progress_, terminal_, step, o_.steps, *loss.value(), tokens_per_step * done / elapsed, elapsed, done);
    }
  }
  if (Status s = save(o_.steps, loader_->position()); !s) return s.error();
  return std::move(metrics_);
}

template <typename T>
TrainMetrics TrainingRun<T>::replay_step() {
  if (pipeline_) pipeline_->replay_step();
  for (int64_t micro = 0; micro < o_.num_micro_batches && !pipeline_; ++micro) net_->hooks_only_pass();
  metrics_.ranks = {rank_peaks(metrics_.ledger)};
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
    case planner::Precision::fp8: break;  // no FP8 GEMMs on the CPU: tessera train refuses it
  }
  return make_error(ErrorCode::invalid_argument, "unknown precision");
}

template <typename T>
Result<TrainMetrics> dry_run_as(const planner::Model& model, const TrainOptions& o) {
  const TokenDataset no_data;
  TrainingRun<T> run(model, o, no_data, std::cerr, false);
  if (Status s = run.prepare(); !s) return s.error();
  return run.replay_step();
}

}  // namespace

Result<TrainMetrics> dry_run(const planner::Model& model, TrainOptions o) {
  o.dry_run = true;
  o.run_directory = nullptr;
  o.run_directory_path.clear();
  o.resume = false;
  if (o.num_micro_batches <= 0) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  switch (o.precision) {
    case planner::Precision::fp32: return dry_run_as<float>(model, o);
    case planner::Precision::bf16: return dry_run_as<bf16>(model, o);
    case planner::Precision::fp16: return dry_run_as<fp16>(model, o);
    case planner::Precision::fp8: break;  // no FP8 GEMMs on the CPU
  }
  return make_error(ErrorCode::invalid_argument, "unknown precision");
}

Result<TrainMetrics> train(const planner::Model& model, const TrainOptions& o, std::ostream& progress, bool terminal) {
  if (o.steps <= 0) return make_error(ErrorCode::invalid_argument, "--steps must be a positive integer");
  if (o.num_micro_batches <= 0) return make_error(ErrorCode::invalid_argument, "--micro-batches must be a positive integer");
  if (o.log_every <= 0) return make_error(ErrorCode::invalid_argument, "the log interval must be a positive number of steps");
  try {
    auto data = load_training_data(o.data_path, model.config, o.micro_batch_size, o.seq_len);
    if (!data) return data.error();
    return train_in_precision(model, o, data.value(), progress, terminal);
  } catch (const std::bad_alloc& e) {
    // AllocationFailure names the tensor's category and size; other allocations say only that memory ran out.
    const std::string what = dynamic_cast<const AllocationFailure*>(&e) != nullptr ? e.what() : "out of memory";
    return make_error(ErrorCode::invalid_argument, what + "; lower --micro-batch or --seq, or use --recompute full");
  }
}

}  // namespace tessera::engine
