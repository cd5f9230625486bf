// A Megatron-LM training log (pretrain_gpt.py's standard output, as the script
// of `tessera export --to megatron` runs it) read back, and set against the
// plan it ran: `tessera compare plan.json megatron.log`.
//
// The lines read are Megatron's own (NVIDIA/Megatron-LM at core_v0.14.0):
//  - training.py training_log, every --log-interval iterations on the last rank:
//    " [date] iteration  N/ T | consumed samples: ... | elapsed time per iteration (ms): X |
//      throughput per GPU (TFLOP/s/GPU): Y | ... | global batch size: G | lm loss: L | ...";
//    the elapsed time is the mean over the interval's iterations.
//  - training/utils.py report_memory, once after the first logged interval, on
//    every rank of data-parallel rank 0: "[Rank R] (after N iterations) memory (MB) |
//    allocated: A | max allocated: M | reserved: S | max reserved: V", PyTorch's
//    memory_allocated, max_memory_allocated, memory_reserved and max_memory_reserved in MiB.
// Other lines, and prefixes a launcher adds ("0: ", "[default0]:"), are ignored.
// On several nodes the training_log lines are in the last node's output and the
// report_memory lines in the others': give the nodes' outputs together (cat).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/planner/plan_file.h"
#include "tessera/planner/status.h"

namespace tessera::planner {

struct MegatronInterval {
  int64_t iteration = 0;         // the last iteration of the interval
  double ms_per_iteration = 0;   // elapsed time per iteration, the interval's mean
  int64_t global_batch = 0;      // sequences per iteration
};

struct MegatronMemory {
  int64_t rank = 0;
  int64_t after_iterations = 0;
  double max_allocated_mib = 0, max_reserved_mib = 0;
};

struct MegatronLog {
  std::vector<MegatronInterval> intervals;  // in log order
  std::vector<MegatronMemory> memory;       // in log order
};

// Errors name the source and the line; a log without a training_log line is an error.
Result<MegatronLog> parse_megatron_log(std::string_view text, const std::string& source);

// The plan's predictions against the log. Memory is compared per reported
// rank against the plan's row for that rank's pipeline stage (Megatron's rank
// order puts pp outermost, as the planner's does), estimated as PyTorch counts
// it: max_memory_allocated without the CUDA context, NCCL's buffers and the
// allocator's reserve, which it does not see (the validation's way, README
// "Validation against published runs"); max_memory_reserved with the reserve.
struct MegatronStageMemory {
  int64_t rank = 0;
  int64_t stage = 0;
  int64_t predicted_allocated = 0, measured_max_allocated = 0;
  int64_t predicted_reserved = 0, measured_max_reserved = 0;
};

struct MegatronComparison {
  std::string plan_description;
  int64_t memory_after_iterations = 0;  // when Megatron reported the memory (0: no report)
  double predicted_step_s = 0, measured_step_s = 0;
  int64_t intervals_used = 0;      // the intervals the measured step is the median of
  bool first_interval_left_out = false;
  double predicted_tokens_per_s = 0, measured_tokens_per_s = 0;
  std::vector<MegatronStageMemory> memory;  // by rank
};

// Plan `plan_index` of `file` (0-based) against `log`; refuses a log of another
// batch, or whose ranks the plan's GPUs do not cover.
Result<MegatronComparison> compare_megatron_run(const PlanFile& file, size_t plan_index, const MegatronLog& log, const std::string& log_source);

}  // namespace tessera::planner
