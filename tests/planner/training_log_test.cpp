// Megatron-LM logs (the lines of training.py training_log and utils.py
// report_memory at core_v0.14.0) and DeepSpeed logs (utils/timer.py
// ThroughputTimer at edaa722) read back and set against the plan they ran.
#include <gtest/gtest.h>

#include <string>

#include "planned.h"
#include "tessera/planner/training_log.h"
#include "tessera/planner/memory_model.h"

namespace tessera::planner {
namespace {

// One training_log line as Megatron formats it, launcher prefix included.
std::string interval_line(int64_t iteration, double ms, int64_t batch) {
  char line[512];
  std::snprintf(line, sizeof line,
                "0:  [2026-12-07 04:00:00] iteration %8lld/%8d | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                "throughput per GPU (TFLOP/s/GPU): 301.2 | learning rate: 1.000000E-04 | global batch size: %5lld | lm loss: 1.037452E+01 | "
                "loss scale: 1.0 | grad norm: 12.345 | number of skipped iterations:   0 | number of nan iterations:   0 |\n",
                static_cast<long long>(iteration), 30, static_cast<long long>(iteration * batch), ms, static_cast<long long>(batch));
  return line;
}

std::string memory_line(int64_t rank, double max_allocated_mib, double max_reserved_mib) {
  char line[256];
  std::snprintf(line, sizeof line, "[Rank %lld] (after 5 iterations) memory (MB) | allocated: 30000.0 | max allocated: %.1f | reserved: %.1f | max reserved: %.1f\n",
                static_cast<long long>(rank), max_allocated_mib, max_reserved_mib, max_reserved_mib);
  return line;
}

TEST(TrainingLog, ReadsMegatronsIntervalsAndMemoryReports) {
  const std::string text = "using world size: 16\n" + interval_line(5, 2400.0, 64) + memory_line(0, 61234.5, 63000.0) + interval_line(10, 1310.2, 64);
  auto log = parse_training_log(text, "run.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->runtime, LoggedRuntime::megatron);
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[1].step, 10);
  EXPECT_DOUBLE_EQ(log->steps[1].seconds, 1.3102);
  EXPECT_EQ(log->steps[1].global_batch, 64);
  ASSERT_EQ(log->memory.size(), 1u);
  EXPECT_EQ(log->memory[0].after_steps, 5);
  EXPECT_DOUBLE_EQ(log->memory[0].max_allocated_mib, 61234.5);
  // Spacing may differ; sizes out of any real range are refused by line.
  auto spaced = parse_training_log(interval_line(5, 10.0, 8) + "[Rank 3]  (after 5 iterations)  memory (MB)|allocated: 1.0|max allocated:  2.5 |reserved: 3|max reserved: 4\n", "s.log");
  ASSERT_TRUE(spaced.ok()) << spaced.error().message;
  ASSERT_EQ(spaced->memory.size(), 1u);
  EXPECT_DOUBLE_EQ(spaced->memory[0].max_allocated_mib, 2.5);
  auto huge = parse_training_log(interval_line(5, 10.0, 8) + memory_line(0, 1e300, 1.0), "h.log");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message, "h.log:2: a report_memory line without its rank, iterations, or max allocated and max reserved in MiB");
  auto none = parse_training_log("", "empty.log");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("empty.log: no step line of Megatron-LM"), std::string::npos);
  auto broken = parse_training_log("iteration 5/30 | elapsed time per iteration (ms): fast | global batch size: 64 |\n", "run.log");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().message, "run.log:1: a training_log line without its iteration, elapsed time or global batch size");
}

// The step is the median of the intervals after the first (warm-up); each
// reported rank is compared with its pipeline stage's row, estimated without
// what PyTorch's counters do not see.
TEST(TrainingLog, ComparesMegatronsStepTimeAndEachStagesPeakWithThePlan) {
  const Planned planned = megatron_llama_70b_tp4_pp4();
  const std::string text = interval_line(5, 9000.0, 256) + memory_line(0, 70000.0, 72000.0) + memory_line(48, 60000.0, 61000.0) +
                           interval_line(10, 3000.0, 256) + interval_line(15, 3100.0, 256) + interval_line(20, 2900.0, 256);
  auto log = parse_training_log(text, "run.log");
  ASSERT_TRUE(log.ok());
  auto c = compare_logged_run(planned.file, 0, log.value(), "run.log");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_DOUBLE_EQ(c->measured_step_s, 3.0);
  EXPECT_EQ(c->steps_used, 3);
  EXPECT_TRUE(c->first_step_left_out);
  EXPECT_DOUBLE_EQ(c->measured_tokens_per_s, 256.0 * 4096 / 3.0);
  EXPECT_DOUBLE_EQ(c->predicted_step_s, planned.candidates[0].simulation.step_time_s);
  ASSERT_EQ(c->memory.size(), 2u);
  EXPECT_EQ(c->memory[1].rank, 48);
  EXPECT_EQ(c->memory[1].stage, 3);
  EXPECT_EQ(c->memory[1].measured_max_allocated, int64_t{60000} << 20);
  EXPECT_EQ(c->memory_after_steps, 5);
  EstimateRequest counted = planned.file.plans[0];
  counted.assumptions.cuda_context_bytes = 0;
  counted.assumptions.nccl_bytes_per_group = 0;
  counted.assumptions.allocator_reserve_fraction = 0;
  auto estimate = estimate_memory(planned.model, planned.file.cluster.gpu, counted);
  ASSERT_TRUE(estimate.ok());
  int rows_of_stage_3 = 0;
  for (const RankMemory& row : estimate->ranks) {
    if (row.first_stage <= 3 && 3 <= row.last_stage) {
      ++rows_of_stage_3;
      EXPECT_EQ(c->memory[1].predicted_allocated, row.device_total);
    }
  }
  EXPECT_EQ(rows_of_stage_3, 1);
  EXPECT_GT(c->memory[1].predicted_reserved, c->memory[1].predicted_allocated) << "the allocator's reserve";
  // A log of another run is refused by what differs.
  auto other_batch = compare_logged_run(planned.file, 0, parse_training_log(interval_line(5, 900.0, 128), "b.log").value(), "b.log");
  ASSERT_FALSE(other_batch.ok());
  EXPECT_EQ(other_batch.error().message, "b.log: iteration 5 ran a global batch of 128, the plan 256; compare the log with the plan it ran");
  auto outside = compare_logged_run(planned.file, 0, parse_training_log(interval_line(5, 900.0, 256) + memory_line(64, 1.0, 1.0), "c.log").value(), "c.log");
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.error().message, "c.log: rank 64 is outside the plan's 64 GPUs; compare the log with the plan it ran");
}

// DeepSpeed's throughput line, as its logger prints it on rank 0.
std::string throughput_line(int64_t step, double samples_per_s, double max_gib) {
  char line[320];
  std::snprintf(line, sizeof line,
                "[2026-12-07 04:00:00,000] [INFO] [timer.py:264:stop] epoch=0/micro_step=%lld/global_step=%lld, RunningAvgSamplesPerSec=%.6f, "
                "CurrSamplesPerSec=%.6f, MemAllocated=12.5GB, MaxMemAllocated=%.2fGB\n",
                static_cast<long long>(2 * step), static_cast<long long>(step), samples_per_s, samples_per_s, max_gib);
  return line;
}

// The step is the plan's global batch (DeepSpeed's train_batch_size) over
// CurrSamplesPerSec; rank 0's latest MaxMemAllocated, its peak; no reserved figure.
TEST(TrainingLog, ComparesDeepSpeedsThroughputAndRankZerosPeak) {
  const Planned planned = plan_for("llama-2-7b", [](PlanRequest& r) { r.runtime = Runtime::deepspeed; });
  const std::string text = throughput_line(10, 20.0, 30.0) + throughput_line(20, 32.0, 31.25) + throughput_line(30, 30.0, 31.5) + throughput_line(40, 34.0, 31.5);
  auto log = parse_training_log(text, "ds.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->runtime, LoggedRuntime::deepspeed);
  auto c = compare_logged_run(planned.file, 0, log.value(), "ds.log");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_DOUBLE_EQ(c->measured_step_s, 64.0 / 32.0);  // the median of 64/32, 64/30 and 64/34
  EXPECT_EQ(c->steps_used, 3);
  ASSERT_EQ(c->memory.size(), 1u);
  EXPECT_EQ(c->memory[0].rank, 0);
  EXPECT_EQ(c->memory[0].measured_max_allocated, int64_t{63} << 29);  // 31.5 GiB
  EXPECT_EQ(c->memory[0].measured_max_reserved, -1);
  EXPECT_EQ(c->memory_after_steps, 40);
  auto mixed = parse_training_log(text + memory_line(0, 1.0, 1.0) + interval_line(5, 1.0, 64), "m.log");
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.error().message, "m.log: holds the lines of more than one runtime (Megatron-LM, DeepSpeed, torchtitan); give one run's log");
}

// torchtitan's coloured metrics line: tokens/s per device over every GPU give the
// step; max_memory_reserved is reset at every log, so the largest line is the peak.
TEST(TrainingLog, ComparesTorchtitansTokensPerDeviceAndReservedPeak) {
  const Planned planned = plan_for("llama-3-8b", [](PlanRequest& r) {
    r.runtime = Runtime::torchtitan;
    r.seq_len = 8192;
  });
  const auto line = [](int step, const char* memory, const char* tps) {
    return std::string("[rank0]:[titan] 2026-12-07 04:00:00,000 - root - INFO - \x1b[31mstep: ") + std::to_string(step) +
           "  \x1b[32mloss:  9.1234  \x1b[33mmemory: " + memory + "GiB(70.12%)  \x1b[34mtps: " + tps +
           "  \x1b[36mtflops: 300.00  \x1b[35mmfu: 30.30%\x1b[39m\n";
  };
  const std::string text = line(10, "50.00", "1,000") + line(20, "60.50", "4,096") + line(30, "60.00", "4,000") + line(40, "59.00", "4,200");
  auto log = parse_training_log(text, "tt.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->runtime, LoggedRuntime::torchtitan);
  auto c = compare_logged_run(planned.file, 0, log.value(), "tt.log");
  ASSERT_TRUE(c.ok()) << c.error().message;
  // 64 sequences of 8192 tokens over 8 GPUs at 4,096 tokens/s each (the median of 4,096, 4,000 and 4,200).
  EXPECT_DOUBLE_EQ(c->measured_step_s, 64.0 * 8192 / (4096.0 * 8));
  ASSERT_EQ(c->memory.size(), 1u);
  EXPECT_EQ(c->memory[0].measured_max_reserved, int64_t{121} << 29);  // 60.5 GiB
  EXPECT_EQ(c->memory[0].measured_max_allocated, -1);
  EXPECT_EQ(c->memory_after_steps, 40);
}

// v0.2.2's line adds grad_norm; its validator's lines, which also carry "step:" and
// "tps:", are not training steps.
TEST(TrainingLog, ReadsTorchtitan022AndSkipsItsValidationLines) {
  const std::string text =
      "[rank0]:[titan] INFO - \x1b[31mstep:  5  \x1b[32mloss:  9.12345  \x1b[38;2;180;60;0mgrad_norm:  1.2345  "
      "\x1b[36mmemory: 41.25GiB(52.10%)  \x1b[34mtps: 3,100  \x1b[36mtflops: 180.00  \x1b[35mmfu: 18.20%\x1b[39m\n"
      "[rank0]:[titan] INFO - \x1b[33mvalidate step:  5  \x1b[32mloss:  9.0000  \x1b[36mmemory: 70.00GiB(88.40%)  \x1b[34mtps: 9,999\x1b[39m\n"
      "[rank0]:[titan] INFO - \x1b[31mstep: 10  \x1b[32mloss:  8.00000  \x1b[38;2;180;60;0mgrad_norm:  1.0000  "
      "\x1b[36mmemory: 41.50GiB(52.40%)  \x1b[34mtps: 3,200  \x1b[36mtflops: 185.00  \x1b[35mmfu: 18.70%\x1b[39m\n";
  auto log = parse_training_log(text, "tt.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->runtime, LoggedRuntime::torchtitan);
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[1].step, 10);
  EXPECT_EQ(log->steps[1].tokens_per_s_per_gpu, 3200);
  ASSERT_EQ(log->memory.size(), 2u);
  EXPECT_EQ(log->memory[1].max_reserved_mib, 41.5 * 1024);
}

}  // namespace
}  // namespace tessera::planner
