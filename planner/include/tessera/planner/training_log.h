// The log of a training run on Megatron-LM, DeepSpeed or torchtitan (the
// standard output of what `tessera export --to megatron` or `--to deepspeed` set
// up, or of a torchtitan run of a --runtime torchtitan plan) read back, and set
// against the plan it ran: `tessera compare plan.json run.log`.
//
// The lines read are the runtimes' own:
//  - Megatron-LM (NVIDIA/Megatron-LM at core_v0.14.0):
//    - training.py training_log, every --log-interval iterations on the last rank:
//      " [date] iteration  N/ T | consumed samples: ... | elapsed time per iteration (ms): X |
//        ... | global batch size: G | lm loss: L | ..."; the elapsed time is the mean over the interval.
//    - training/utils.py report_memory, once after the first logged interval, on
//      every rank of data-parallel rank 0: "[Rank R] (after N iterations) memory (MB) |
//      allocated: A | max allocated: M | reserved: S | max reserved: V", PyTorch's
//      memory_allocated, max_memory_allocated, memory_reserved and max_memory_reserved in MiB.
//  - DeepSpeed (deepspeedai/DeepSpeed at edaa722): utils/timer.py ThroughputTimer.stop,
//    every steps_per_print optimizer steps on rank 0 only (runtime/engine.py, report_progress):
//    "epoch=E/micro_step=M/global_step=G, RunningAvgSamplesPerSec=A, CurrSamplesPerSec=C,
//    MemAllocated=XGB, MaxMemAllocated=YGB", C being train_batch_size over that step's time
//    and the sizes PyTorch's, in GiB rounded to hundredths.
//  - torchtitan (pytorch/torchtitan 0.1.0 and v0.2.2, components/metrics.py MetricsProcessor.log),
//    every metrics.log_freq steps: "step: N  loss: L  [grad_norm: G  ]memory: XGiB(P%)  tps: T
//    tflops: F  mfu: M%", in ANSI colours; T is tokens per second per device (the step's tokens
//    over the interval's time and the GPUs of one data-parallel rank), X the interval's
//    max_memory_reserved (its peak statistics are reset at every log) of the rank that
//    prints, rank 0 under torchtitan's run_train.sh (--local-ranks-filter 0). Its
//    validator's "validate step: ..." lines (v0.2.2 MetricsProcessor.log_validation) are
//    not training steps and are skipped.
// Other lines, and prefixes a launcher or logger adds, are ignored. On several
// nodes Megatron's step lines are in the last node's output and its memory
// lines in the others': give the nodes' outputs together (cat).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

enum class LoggedRuntime { megatron, deepspeed, torchtitan };

// "Megatron-LM", "DeepSpeed", "torchtitan".
const char* logged_runtime_name(LoggedRuntime runtime);

// The largest log `tessera compare` and the GUI read: a log of thousands of
// iterations on a large cluster stays far below it.
inline constexpr size_t kMaxTrainingLogBytes = size_t{256} << 20;

struct LoggedStep {
  int64_t step = 0;            // Megatron: the interval's last iteration; DeepSpeed: the global step
  double seconds = 0;          // Megatron: the interval's mean iteration time (0: not logged)
  double samples_per_s = 0;    // DeepSpeed: that step's CurrSamplesPerSec (0: not logged)
  double tokens_per_s_per_gpu = 0;  // torchtitan: tps (0: not logged)
  int64_t global_batch = 0;    // Megatron: sequences per iteration (0: not logged)
};

struct LoggedMemory {
  int64_t rank = 0;
  int64_t after_steps = 0;
  double max_allocated_mib = -1;  // -1: not logged (torchtitan)
  double max_reserved_mib = -1;   // -1: not logged (DeepSpeed)
};

struct TrainingLog {
  LoggedRuntime runtime = LoggedRuntime::megatron;
  std::vector<LoggedStep> steps;      // in log order
  std::vector<LoggedMemory> memory;   // in log order
};

// Errors name the source and the line; a log without a step line of any of
// the runtimes, or with several runtimes' lines, is an error.
Result<TrainingLog> parse_training_log(std::string_view text, const std::string& source);

// The plan's predictions against the log. Memory is compared per reported rank
// against the plan's row for that rank's pipeline stage (Megatron's rank order
// puts pp outermost, as the planner's does; DeepSpeed's and torchtitan's rank 0 is stage 0),
// estimated as PyTorch counts it: max_memory_allocated without the CUDA
// context, NCCL's buffers and the allocator's reserve, which it does not see
// (the validation's way, README "Validation against published runs");
// max_memory_reserved with the reserve.
struct LoggedStageMemory {
  int64_t rank = 0;
  int64_t stage = 0;
  int64_t predicted_allocated = 0, measured_max_allocated = -1;  // -1: not logged
  int64_t predicted_reserved = 0, measured_max_reserved = -1;
};

struct LoggedRunComparison {
  LoggedRuntime runtime = LoggedRuntime::megatron;
  std::string plan_description;
  double predicted_step_s = 0, measured_step_s = 0;
  int64_t steps_used = 0;         // the logged steps (intervals) the measured step is the median of
  bool first_step_left_out = false;
  double predicted_tokens_per_s = 0, measured_tokens_per_s = 0;
  int64_t memory_after_steps = 0;  // when the memory was last reported (0: no report)
  std::vector<LoggedStageMemory> memory;  // by rank
};

// Plan `plan_index` of `file` (0-based) against `log`; refuses a log of another
// batch, or whose ranks the plan's GPUs do not cover.
Result<LoggedRunComparison> compare_logged_run(const PlanFile& file, size_t plan_index, const TrainingLog& log, const std::string& log_source);

}  // namespace tessera::planner
