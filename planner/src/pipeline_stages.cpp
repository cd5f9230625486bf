#include "tessera/planner/pipeline_stages.h"

#include <algorithm>
#include <numeric>

namespace tessera::planner {
namespace {

int64_t interleaved_warmup(int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks) {
  return std::min((pp - stage - 1) * 2 + (chunks - 1) * pp, num_micro_batches * chunks);
}

}  // namespace

std::vector<StageLayers> split_layers(int num_layers, int pp) {
  std::vector<StageLayers> stages(static_cast<size_t>(pp));
  const int quotient = num_layers / pp;
  const int remainder = num_layers % pp;
  const int start = pp / 2 - remainder / 2;
  int next = 0;
  for (int s = 0; s < pp; ++s) {
    const bool extra = s >= start && s < start + remainder;
    stages[static_cast<size_t>(s)] = StageLayers{next, quotient + (extra ? 1 : 0)};
    next += stages[static_cast<size_t>(s)].num_layers;
  }
  return stages;
}

std::vector<std::vector<StageLayers>> stage_chunks(int num_layers, int pp, int chunks) {
  const std::vector<StageLayers> virtual_stages = split_layers(num_layers, pp * chunks);
  std::vector<std::vector<StageLayers>> stages(static_cast<size_t>(pp));
  for (int v = 0; v < pp * chunks; ++v) stages[static_cast<size_t>(v % pp)].push_back(virtual_stages[static_cast<size_t>(v)]);
  return stages;
}

std::vector<int64_t> interleaved_chunk_counts(int64_t num_layers, int64_t pp) {
  if (pp < 2 || num_layers < pp) return {};
  int64_t common = 0;  // the greatest common divisor of the stages' blocks
  for (const StageLayers& stage : split_layers(static_cast<int>(num_layers), static_cast<int>(pp))) common = std::gcd(common, int64_t{stage.num_layers});
  std::vector<int64_t> counts;
  for (int64_t v = 2; v <= common; ++v) {
    if (common % v == 0) counts.push_back(v);
  }
  return counts;
}

std::string describe_layer_split(int num_layers, int pp, int chunks) {
  std::vector<int> per_stage;
  for (const std::vector<StageLayers>& stage : stage_chunks(num_layers, pp, chunks)) {
    int layers = 0;
    for (const StageLayers& chunk : stage) layers += chunk.num_layers;
    per_stage.push_back(layers);
  }
  std::string text;
  for (size_t i = 0; i < per_stage.size();) {
    size_t run = 1;
    while (i + run < per_stage.size() && per_stage[i + run] == per_stage[i]) ++run;
    text += (text.empty() ? "" : ", ") + std::to_string(per_stage[i]) + (run > 1 ? " × " + std::to_string(run) : "");
    i += run;
  }
  return text;
}

StageScheduleCursor::StageScheduleCursor(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks)
    // Only the interleaved schedule has more than one chunk a stage.
    : schedule_(schedule), pp_(pp), chunks_(schedule == PipelineSchedule::interleaved ? chunks : 1), length_(2 * num_micro_batches * chunks_) {
  switch (schedule) {
    case PipelineSchedule::gpipe: warmup_ = num_micro_batches; break;  // every forward first
    case PipelineSchedule::one_f_one_b: warmup_ = std::min(pp - stage - 1, num_micro_batches); break;
    case PipelineSchedule::interleaved: warmup_ = interleaved_warmup(pp, stage, num_micro_batches, chunks); break;
  }
  forward_ = forward_at(0);
}

std::vector<PipelineOp> stage_schedule(PipelineSchedule schedule, int64_t pp, int64_t k, int64_t num_micro_batches, int64_t chunks) {
  std::vector<PipelineOp> ops;
  ops.reserve(static_cast<size_t>(2 * num_micro_batches * chunks));
  for (StageScheduleCursor cursor(schedule, pp, k, num_micro_batches, chunks); !cursor.done(); cursor.advance()) ops.push_back(cursor.op());
  return ops;
}

std::vector<std::vector<PipelineOp>> pipeline_schedule(PipelineSchedule schedule, int64_t pp, int64_t num_micro_batches, int64_t chunks) {
  std::vector<std::vector<PipelineOp>> stages;
  stages.reserve(static_cast<size_t>(pp));
  for (int64_t k = 0; k < pp; ++k) stages.push_back(stage_schedule(schedule, pp, k, num_micro_batches, chunks));
  return stages;
}

std::vector<int64_t> in_flight_at_peak(PipelineSchedule schedule, int64_t pp, int64_t stage, int64_t num_micro_batches, int64_t chunks,
                                       const std::vector<int64_t>& bytes_per_pass) {
  if (pp == 1) return {1};  // gradient accumulation: each micro-batch's backward frees its activations
  if (schedule == PipelineSchedule::gpipe) return {num_micro_batches};
  if (schedule == PipelineSchedule::one_f_one_b) return {std::min(pp - stage, num_micro_batches)};
  // Stage `stage`'s table without the repeats that cannot raise the peak: the
  // warm-up forwards, then the steady state's forward-backward pairs for one
  // period only. Every pp · chunks consecutive passes run each chunk pp times,
  // so over a period of pairs the held passes come back to where they were and
  // later periods repeat its values (the peak is the first strictly larger
  // value); the cool-down's backwards only free.
  StageScheduleCursor cursor(schedule, pp, stage, num_micro_batches, chunks);
  const int64_t passes = cursor.warmup() + 2 * std::min(num_micro_batches * chunks - cursor.warmup(), pp * chunks);
  const auto sign = [](const PipelineOp& op) -> int64_t { return op.pass == PipelinePass::forward ? 1 : -1; };
  int64_t bytes = 0, peak_bytes = -1, peak_passes = 0;  // the bytes peaked after the first peak_passes passes
  for (int64_t n = 0; n < passes; ++n, cursor.advance()) {
    const PipelineOp op = cursor.op();
    bytes += sign(op) * bytes_per_pass[static_cast<size_t>(op.chunk)];
    if (bytes > peak_bytes) {
      peak_bytes = bytes;
      peak_passes = n + 1;
    }
  }
  // The passes of each chunk held then, counted on a second walk up to the peak
  // (cheaper than copying the counts at every new peak: in the warm-up each forward is one).
  std::vector<int64_t> held(static_cast<size_t>(chunks), 0);
  StageScheduleCursor again(schedule, pp, stage, num_micro_batches, chunks);
  for (int64_t n = 0; n < peak_passes; ++n, again.advance()) held[static_cast<size_t>(again.op().chunk)] += sign(again.op());
  return held;
}

}  // namespace tessera::planner
