// Megatron-LM, DeepSpeed and torchtitan training logs read back and set against a plan; the formats are in training_log.h.
#include "tessera/planner/training_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>

#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"
#include "tessera/planner/search.h"

namespace tessera::planner {
namespace {

constexpr std::string_view kElapsed = "elapsed time per iteration (ms):";
constexpr std::string_view kMemory = "memory (MB)";
constexpr std::string_view kSamplesPerSec = "CurrSamplesPerSec=";
constexpr std::string_view kTps = "tps: ";
// Bounds that no real run reaches: an hour per iteration, 2^40 MiB of memory.
constexpr double kMaxMsPerIteration = 3.6e6;
constexpr double kMaxMib = 1099511627776.0;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> to_int(std::string_view s) {
  s = trim(s);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// The value after "key:" in one of the line's " | "-separated fields.
std::optional<std::string_view> field(std::string_view line, std::string_view key) {
  size_t at = 0;
  while (at <= line.size()) {
    const size_t bar = line.find('|', at);
    const std::string_view part = trim(line.substr(at, bar == std::string_view::npos ? std::string_view::npos : bar - at));
    if (part.starts_with(key) && part.size() > key.size() && part[key.size()] == ':') return part.substr(key.size() + 1);
    if (bar == std::string_view::npos) break;
    at = bar + 1;
  }
  return std::nullopt;
}

Error bad_line(const std::string& source, size_t number, const std::string& what) {
  return make_error(ErrorCode::parse_error, source + ":" + std::to_string(number) + ": " + what);
}

std::optional<LoggedStep> read_interval(std::string_view line) {
  LoggedStep out;
  const size_t it = line.find("iteration ");
  const size_t slash = it == std::string_view::npos ? it : line.find('/', it);
  if (slash == std::string_view::npos) return std::nullopt;
  const auto iteration = to_int(line.substr(it + 10, slash - it - 10));
  const auto elapsed = field(line, "elapsed time per iteration (ms)");
  if (!elapsed) return std::nullopt;
  const auto ms = to_double(*elapsed);
  const auto batch = field(line, "global batch size");
  if (!batch) return std::nullopt;
  const auto sequences = to_int(*batch);
  if (!iteration || *iteration < 0 || !ms || !(*ms > 0 && *ms <= kMaxMsPerIteration) || !sequences || *sequences <= 0) return std::nullopt;
  out.step = *iteration;
  out.seconds = *ms / 1000;
  out.global_batch = *sequences;
  return out;
}

std::optional<LoggedMemory> read_memory(std::string_view line) {
  LoggedMemory out;
  const size_t rank_at = line.find("[Rank ");
  const size_t after_at = line.find("(after ");
  if (rank_at == std::string_view::npos || after_at == std::string_view::npos) return std::nullopt;
  const auto rank = to_int(line.substr(rank_at + 6, line.find(']', rank_at) - rank_at - 6));
  const auto after = to_int(line.substr(after_at + 7, line.find(" iterations)", after_at) - after_at - 7));
  const auto max_allocated = field(line, "max allocated");
  const auto max_reserved = field(line, "max reserved");
  if (!rank || *rank < 0 || !after || *after < 0 || !max_allocated || !max_reserved) return std::nullopt;
  const auto m = to_double(*max_allocated), v = to_double(*max_reserved);
  const auto in_range = [](const std::optional<double>& mib) { return mib && *mib >= 0 && *mib <= kMaxMib; };
  if (!in_range(m) || !in_range(v)) return std::nullopt;
  out.rank = *rank;
  out.after_steps = *after;
  out.max_allocated_mib = *m;
  out.max_reserved_mib = *v;
  return out;
}

// The value after "key=" up to the next comma, space or end.
std::optional<std::string_view> assigned(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = line.substr(at + key.size());
  return rest.substr(0, rest.find_first_of(", "));
}

// DeepSpeed's ThroughputTimer line: the step, its samples per second and rank 0's peak.
std::optional<std::pair<LoggedStep, LoggedMemory>> read_throughput(std::string_view line) {
  const auto step = assigned(line, "global_step=");
  const auto samples = assigned(line, kSamplesPerSec);
  const auto peak = assigned(line, "MaxMemAllocated=");
  if (!step || !samples || !peak || !peak->ends_with("GB")) return std::nullopt;
  const auto g = to_int(*step);
  const auto c = to_double(*samples);
  const auto gib = to_double(peak->substr(0, peak->size() - 2));
  if (!g || *g < 0 || !c || !(*c > 0 && *c < 1e12) || !gib || !(*gib >= 0 && *gib * 1024 <= kMaxMib)) return std::nullopt;
  LoggedStep s;
  s.step = *g;
  s.samples_per_s = *c;
  LoggedMemory m;
  m.rank = 0;  // DeepSpeed reports progress on rank 0 only
  m.after_steps = *g;
  m.max_allocated_mib = *gib * 1024;
  return std::pair{s, m};
}

// The line without ANSI colour codes (ESC [ ... m), as torchtitan's logger colours it.
std::string without_colours(std::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      const size_t m = line.find('m', i);
      if (m == std::string_view::npos) break;
      i = m;
      continue;
    }
    out += line[i];
  }
  return out;
}

// The token after "key" up to the next space.
std::optional<std::string_view> after(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = trim(line.substr(at + key.size()));
  return rest.substr(0, rest.find(' '));
}

// torchtitan's metrics line: the step, tokens/s per device and the interval's max reserved.
std::optional<std::pair<LoggedStep, LoggedMemory>> read_torchtitan(const std::string& line) {
  const auto step = after(line, "step:");
  const auto memory = after(line, "memory:");
  const auto tps = after(line, kTps);
  if (!step || !memory || !tps) return std::nullopt;
  std::string digits(*tps);
  std::erase(digits, ',');
  const auto g = to_int(*step);
  const auto t = to_double(digits);
  const size_t gib_at = memory->find("GiB");
  if (gib_at == std::string_view::npos) return std::nullopt;
  const auto gib = to_double(memory->substr(0, gib_at));
  if (!g || *g < 0 || !t || !(*t > 0 && *t < 1e12) || !gib || !(*gib >= 0 && *gib * 1024 <= kMaxMib)) return std::nullopt;
  LoggedStep s;
  s.step = *g;
  s.tokens_per_s_per_gpu = *t;
  LoggedMemory m;
  m.rank = 0;  // torchtitan's run_train.sh shows rank 0's output
  m.after_steps = *g;
  m.max_reserved_mib = *gib * 1024;
  return std::pair{s, m};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int64_t mib_to_bytes(double mib) { return std::llround(mib * 1024 * 1024); }

// The plan's rows as PyTorch's counters see them.
Result<MemoryEstimate> estimate_as_pytorch_counts(const Model& model, const PlanFile& file, EstimateRequest request, bool with_reserve) {
  request.assumptions = request.assumptions.as_pytorch_counts(with_reserve);
  return estimate_memory(model, file.cluster.gpu, request);
}

const RankMemory* row_of_stage(const MemoryEstimate& e, int64_t stage) {
  for (const RankMemory& r : e.ranks) {
    if (stage >= r.first_stage && stage <= r.last_stage) return &r;
  }
  return nullptr;
}

}  // namespace

const char* logged_runtime_name(LoggedRuntime runtime) {
  switch (runtime) {
    case LoggedRuntime::megatron: return "Megatron-LM";
    case LoggedRuntime::deepspeed: return "DeepSpeed";
    case LoggedRuntime::torchtitan: return "torchtitan";
  }
  return "";
}

Result<TrainingLog> parse_training_log(std::string_view text, const std::string& source) {
  TrainingLog log;
  bool megatron = false, deepspeed = false, torchtitan = false;
  size_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    if (line.find(kElapsed) != std::string_view::npos) {
      const auto interval = read_interval(line);
      if (!interval) return bad_line(source, number, "a training_log line without its iteration, elapsed time or global batch size");
      log.steps.push_back(*interval);
      megatron = true;
    } else if (line.find(kMemory) != std::string_view::npos && line.find("[Rank ") != std::string_view::npos) {
      const auto memory = read_memory(line);
      if (!memory) return bad_line(source, number, "a report_memory line without its rank, iterations, or max allocated and max reserved in MiB");
      log.memory.push_back(*memory);
      megatron = true;
    } else if (line.find(kSamplesPerSec) != std::string_view::npos) {
      const auto throughput = read_throughput(line);
      if (!throughput) return bad_line(source, number, "a DeepSpeed throughput line without its global_step, CurrSamplesPerSec or MaxMemAllocated");
      log.steps.push_back(throughput->first);
      log.memory.push_back(throughput->second);
      deepspeed = true;
    } else if (line.find(kTps) != std::string_view::npos && line.find("step:") != std::string_view::npos &&
               line.find("validate step:") == std::string_view::npos) {
      const auto metrics = read_torchtitan(without_colours(line));
      if (!metrics) return bad_line(source, number, "a torchtitan metrics line without its step, memory in GiB or tps");
      log.steps.push_back(metrics->first);
      log.memory.push_back(metrics->second);
      torchtitan = true;
    }
  }
  if (int{megatron} + int{deepspeed} + int{torchtitan} > 1) {
    return make_error(ErrorCode::parse_error, source + ": holds the lines of more than one runtime (Megatron-LM, DeepSpeed, torchtitan); give one run's log");
  }
  if (log.steps.empty()) {
    return make_error(ErrorCode::parse_error, source + ": no step line of Megatron-LM (\"... | " + std::string(kElapsed) + " ... |\"), DeepSpeed (\"" +
                                                  std::string(kSamplesPerSec) + "...\") or torchtitan (\"step: ... " + std::string(kTps) +
                                                  "...\"); give the run's standard output, every node's together");
  }
  log.runtime = deepspeed ? LoggedRuntime::deepspeed : torchtitan ? LoggedRuntime::torchtitan : LoggedRuntime::megatron;
  return log;
}

Result<LoggedRunComparison> compare_logged_run(const PlanFile& file, size_t plan_index, const TrainingLog& log, const std::string& log_source) {
  if (plan_index >= file.plans.size()) {
    return make_error(ErrorCode::invalid_argument, "--plan " + std::to_string(plan_index + 1) + " is out of range: the plan file holds plans 1 to " +
                                                       std::to_string(file.plans.size()));
  }
  const EstimateRequest& r = file.plans[plan_index];
  for (const LoggedStep& s : log.steps) {
    if (s.global_batch != 0 && s.global_batch != file.global_batch_size) {
      return make_error(ErrorCode::invalid_argument, log_source + ": iteration " + std::to_string(s.step) + " ran a global batch of " +
                                                         std::to_string(s.global_batch) + ", the plan " + std::to_string(file.global_batch_size) +
                                                         "; compare the log with the plan it ran");
    }
  }
  auto model = load_model(file.model_source, "model.source");
  if (!model) return model.error();
  LoggedRunComparison out;
  out.runtime = log.runtime;
  out.plan_description = describe_plan(r);
  const nlohmann::json& plan = file.document["plans"][plan_index];
  out.predicted_step_s = plan.value("step_time_s", 0.0);
  out.predicted_tokens_per_s = plan.value("tokens_per_s", 0.0);
  // The first logged step holds the warm-up (allocation, NCCL set-up, compilation): left out where there are others.
  // DeepSpeed's samples are train_batch_size, the plan's global batch (export --to deepspeed), over the step's time;
  // torchtitan's tokens per device, over every GPU, are the step's tokens over its time.
  const auto tokens_per_step = static_cast<double>(file.global_batch_size * file.seq_len);
  std::vector<double> seconds;
  out.first_step_left_out = log.steps.size() > 1;
  for (size_t k = out.first_step_left_out ? 1 : 0; k < log.steps.size(); ++k) {
    const LoggedStep& s = log.steps[k];
    if (s.seconds > 0) {
      seconds.push_back(s.seconds);
    } else if (s.samples_per_s > 0) {
      seconds.push_back(static_cast<double>(file.global_batch_size) / s.samples_per_s);
    } else {
      seconds.push_back(tokens_per_step / (s.tokens_per_s_per_gpu * static_cast<double>(r.layout.world_size())));
    }
  }
  out.steps_used = static_cast<int64_t>(seconds.size());
  out.measured_step_s = median(seconds);
  out.measured_tokens_per_s = tokens_per_step / out.measured_step_s;

  auto allocated = estimate_as_pytorch_counts(model.value(), file, r, false);
  if (!allocated) return allocated.error();
  auto reserved = estimate_as_pytorch_counts(model.value(), file, r, true);
  if (!reserved) return reserved.error();
  const int64_t world = r.layout.world_size();
  const int64_t per_stage = world / r.layout.pp;
  // Each rank's largest report (torchtitan resets its peaks at every log) and the last step reported.
  std::map<int64_t, LoggedMemory> peak;
  for (const LoggedMemory& m : log.memory) {
    if (m.rank < 0 || m.rank >= world) {
      return make_error(ErrorCode::invalid_argument, log_source + ": rank " + std::to_string(m.rank) + " is outside the plan's " +
                                                         std::to_string(world) + " GPUs; compare the log with the plan it ran");
    }
    const auto [it, first] = peak.emplace(m.rank, m);
    if (first) continue;
    it->second.max_allocated_mib = std::max(it->second.max_allocated_mib, m.max_allocated_mib);
    it->second.max_reserved_mib = std::max(it->second.max_reserved_mib, m.max_reserved_mib);
    it->second.after_steps = std::max(it->second.after_steps, m.after_steps);
  }
  for (const auto& [rank, m] : peak) {
    const int64_t stage = rank / per_stage;  // pp outermost in both rank orders
    const RankMemory* a = row_of_stage(allocated.value(), stage);
    const RankMemory* v = row_of_stage(reserved.value(), stage);
    if (!a || !v) return make_error(ErrorCode::invalid_argument, "the plan's estimate has no row for pipeline stage " + std::to_string(stage));
    out.memory.push_back({rank, stage, a->device_total, m.max_allocated_mib < 0 ? -1 : mib_to_bytes(m.max_allocated_mib), v->device_total,
                          m.max_reserved_mib < 0 ? -1 : mib_to_bytes(m.max_reserved_mib)});
    out.memory_after_steps = std::max(out.memory_after_steps, m.after_steps);
  }
  return out;
}

}  // namespace tessera::planner
