// The training loop on the CPU: data, micro-batches with gradient accumulation,
// optimizer, progress, and the metrics the planner's estimate is compared with.
#pragma once

#include <cstdint>
#include <optional>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/loss_scaler.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/rank_reports.h"
#include "tessera/engine/run_directory.h"
#include "tessera/planner/model.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

struct TrainOptions {
  int64_t micro_batch_size = 4;
  int64_t seq_len = 64;
  int64_t num_micro_batches = 1;  // accumulated per optimizer step
  planner::RecomputeMode recompute = planner::RecomputeMode::none;
  int64_t recompute_num_layers = 0;  // under full: the first blocks of each chunk recomputed whole; 0 = every block
  // fp32, or mixed precision: bf16, or fp16 with the dynamic loss scaler.
  planner::Precision precision = planner::Precision::fp32;
  LossScalerOptions loss_scaler;  // fp16 only
  int64_t steps = 50;
  uint64_t seed = 1;
  std::string data_path;          // text (bytes) or an llm.c .bin shard
  OptimizerOptions optimizer;
  int64_t log_every = 10;         // plain log lines when not on a terminal
  // Where checkpoints are committed (run_directory.h), at the end, every
  // `save_every` steps and when the run stops early; null: none.
  RunDirectory* run_directory = nullptr;
  // Continue from run_directory's committed checkpoint up to `steps`; where it
  // holds none yet, start at step 1 (so one command line serves every relaunch).
  bool resume = false;
  // Resume although settings that change what the run computes (precision,
  // batch shape, data, model, learning rate) differ from the checkpoint's.
  bool allow_changes = false;
  int64_t save_every = 0;         // also save every N steps (0: only at the end)
  // The model's config.json, saved into every checkpoint (so transformers can
  // load it) and compared on resume.
  std::string model_config_text;
  // Polled before each micro-batch: once true, the run abandons the step in
  // progress, commits the last complete step and returns (TrainMetrics::stopped).
  std::function<bool()> stop_requested;
  // Called after each save with the metrics so far (the command line writes metrics.json).
  std::function<Status(const struct TrainMetrics&)> on_save;
  // Data parallelism: the group of ranks (null: this rank alone) and the
  // plan's plugin (parallel/data_parallel.h). Each rank trains on its share of
  // every step's global batch of group size · num_micro_batches · micro_batch_size sequences.
  // Under context parallelism: the data- and context-parallel ranks together
  // (ProcessGroups::data_context), which reduce the gradients; the context
  // ranks of one data-parallel rank read the same sequences.
  comm::Communicator* data_parallel_group = nullptr;
  // Tensor parallelism (model/tensor_parallel.h): the ranks that split every
  // layer with this one (null: none). The gradient norm sums over it and its
  // checkpoints are consolidated into whole tensors (checkpoint.h).
  comm::Communicator* tensor_parallel_group = nullptr;
  bool sequence_parallel = false;  // Megatron's sequence parallelism in that group
  // Context parallelism (model/ring_attention.h): the ranks that split every
  // sequence with this one (null or one rank: none); each keeps its two
  // chunks of the seq_len tokens (planner/context_parallel.h).
  comm::Communicator* context_parallel_group = nullptr;
  // Pipeline parallelism (parallel/pipeline.h): the stages' group (null or
  // one rank: none), whose rank is this rank's stage; the schedule the stages
  // run; the model chunks per stage (more than 1: interleaved). The step's
  // num_micro_batches flow through the pipeline.
  comm::Communicator* pipeline_parallel_group = nullptr;
  planner::PipelineSchedule pipeline_schedule = planner::PipelineSchedule::one_f_one_b;
  int64_t model_chunks = 1;
  // Every rank of the run (null: the data-parallel group): where the ranks
  // agree on stops and saves, average the loss and gather their peaks.
  comm::Communicator* world_group = nullptr;
  planner::PluginOptions plugin;
  // Gemini `auto`: the leading chunks whose 16-bit shards the planner's solve
  // puts on the host for this run's device (GeminiSummary::parameters_on_host);
  // unset: as the plugin's placement says.
  std::optional<int64_t> gemini_parameter_chunks_on_host;
  // Ranks other than 0: the run directory rank 0 holds (run_directory is null
  // there), into whose staging directory they write their checkpoint shards.
  std::string run_directory_path;
  // A dry run (dry_run()): the ledger books and allocates nothing.
  bool dry_run = false;
  // The device space's capacity in bytes (0: none), as a GPU's memory:
  // an allocation past it fails with AllocationFailure. On a GPU it caps
  // the caching allocator instead (cuda/gpu_train.h, device/caching_allocator.h).
  int64_t device_capacity_bytes = 0;
};

struct TrainMetrics {
  int64_t first_step = 1;            // > 1 after a resume
  std::vector<double> loss;          // mean loss of each step's micro-batches, over all ranks
  std::vector<double> grad_norm;    // NaN where an fp16 step was skipped
  std::vector<double> loss_scale;   // fp16: the scale each step ran with (1 otherwise)
  std::vector<int64_t> skipped_steps;  // fp16: steps skipped on inf/NaN gradients
  std::vector<double> step_time_s;
  double tokens_per_s = 0;           // over all steps
  double achieved_flops_per_s = 0;   // model FLOPs (forward + backward) per second
  MemoryLedger ledger;               // this rank's peaks per category and memory space
  std::vector<RankPeaks> ranks;      // every rank's peaks, in rank order (at the last save)
  comm::CommCounters communication;  // this rank's calls and payload bytes per collective, in its data-parallel group
  comm::CommCounters tensor_parallel_communication;  // the same in its tensor-parallel group
  comm::CommCounters pipeline_parallel_communication;  // the same in its pipeline group
  comm::CommCounters context_parallel_communication;  // the same in its context-parallel group (the ring attention's sends)
  int64_t chunk_moves = 0;           // this rank's chunk moves between host and device (Gemini)
  // Rank 0, on several ranks: every rank's timeline of the last step, in rank order (timeline.h).
  std::vector<std::vector<TimelineEvent>> timelines;
  int64_t checkpoint_step = 0;       // the committed checkpoint's step at the end (0: none)
  bool stopped = false;              // stop_requested ended the run before `steps`
};

// `progress` receives a progress bar (terminal) or log lines. Out of memory is
// an error naming the allocation, not an exception.
Result<TrainMetrics> train(const planner::Model& model, const TrainOptions& options, std::ostream& progress, bool terminal);

// One optimizer step of this rank's allocations and frees, in their real
// order and sizes, with no data, no arithmetic and no communication: the
// model, the plugin's shards and buffers, and every unit gathered and released
// over the micro-batches, booked in a dry-run ledger (memory_ledger.h). Give a
// data_parallel_group from comm::make_dry_run_communicator(rank, size) to be
// any rank of any size; `metrics.ranks` holds the rank's peaks.
Result<TrainMetrics> dry_run(const planner::Model& model, TrainOptions options);

}  // namespace tessera::engine
