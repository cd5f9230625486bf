#include "train_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "launcher.h"
#include "measured_trace.h"
#include "stop_signals.h"
#include "train_plan.h"
#include "tessera/engine/data.h"
#include "tessera/engine/device/gpu_plugins.h"
#include "tessera/engine/device/gpu_presence.h"
#include "tessera/engine/device/rank_device.h"
#if defined(TESSERA_HAVE_CUDNN)
#include "tessera/engine/cuda/gpu_train.h"
#endif
#include "tessera/engine/comm/dry_run.h"
#include "tessera/engine/comm/local.h"
#include "tessera/engine/host_memory.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/run_directory.h"
#include "tessera/engine/ops/workspace.h"
#include "tessera/engine/cpu_run_request.h"
#include "tessera/engine/parallel/process_groups.h"
#include "tessera/engine/parallel/strategy.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/report.h"

namespace tessera::cli {
namespace {

using nlohmann::json;
using namespace tessera::planner;

// The shipped text under TESSERA_DATA_DIR from the environment where that is
// set (programs built in another tree: tools/gpu-check's prepared ones), else
// under this source tree's data/.
std::string shipped_text_path() {
  const char* dir = std::getenv("TESSERA_DATA_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : TESSERA_DATA_DIR) + "/text/kjv-genesis-exodus.txt";
}

// The request the GPU step's run corresponds to: its DDP buckets are views of
// the gradients, and the NCCL communicator sums in rank order through a
// scratch (planner/rank_order_reduction.h), as tools/gpu-check estimates its runs.
EstimateRequest gpu_request(EstimateRequest r) {
  r.plugin.gradient_as_bucket_view = true;
  r.plugin.rank_order_reduction = true;
  return r;
}

// Options `tessera train` shares with `tessera estimate` that describe what
// the engine does its own way (its DDP buckets are always views of the
// gradients): refused rather than silently ignored.
constexpr const char* kClusterOnlyOptions[] = {"--gradient-as-bucket-view"};
// What a plan file sets; given beside --plan they would be overridden.
constexpr const char* kSetByPlan[] = {"--model", "--micro-batch", "--seq", "--micro-batches", "--precision", "--optimizer", "--recompute", "--recompute-num-layers", "--activation-profile"};
constexpr const char* kLossScalerOptions[] = {"--loss-scale", "--loss-scale-window", "--hysteresis"};

Status check_given_options(const TrainCliOptions& o) {
  for (const char* name : kClusterOnlyOptions) {
    if (o.given.contains(name)) return make_error(ErrorCode::unsupported, std::string(name) + " does not apply to the engine's data-parallel CPU run; leave it out");
  }
  if (o.given.contains("--plan-number") && o.plan.empty()) {
    return make_error(ErrorCode::invalid_argument, "--plan-number picks a plan of the file --plan names; give --plan too");
  }
  if (!o.plan.empty()) {
    for (const char* name : kSetByPlan) {
      if (o.given.contains(name)) return make_error(ErrorCode::invalid_argument, std::string(name) + ": --plan sets the model and training options; give one or the other");
    }
  }
  return Status::success();
}

// Whether this build has the one-GPU training step (engine/cuda/gpu_train.h:
// CUDA and cuDNN were found).
#if defined(TESSERA_HAVE_CUDNN)
constexpr bool kGpuTrainingBuilt = true;
#else
constexpr bool kGpuTrainingBuilt = false;
#endif

// `--gpu NAME`: only what the GPU step runs (bf16, AdamW; one GPU, or DDP,
// ZeRO-1/2, FSDP, Gemini, tensor parallelism (with DDP or ZeRO-1/2) or a
// pipeline (with DDP or ZeRO-1) with one rank per GPU under a launcher,
// engine::check_gpu_plugin and check_gpu_layout); each refusal one line naming the option.
Status check_gpu_settings(const TrainCliOptions& o) {
  const planner::EstimateRequest& r = o.estimate.request;
  if (Status s = engine::check_gpu_plugin(r.plugin); !s) return s;
  if (Status s = engine::check_gpu_layout(r.plugin, r.layout); !s) return s;
  if (Status s = engine::check_gpu_optimizer(r.training.optimizer); !s) return s;
  if (r.training.precision != Precision::bf16) {
    return make_error(ErrorCode::unsupported, "--precision " + o.estimate.precision + ": the GPU training step runs bf16 mixed precision; use --precision bf16");
  }
  return Status::success();
}

// This rank's GPU: a device, a build with the step, and one GPU per rank on
// this machine; each refusal one line naming --gpu.
Result<int> find_gpu_device(const TrainCliOptions& o, const engine::comm::Communicator& world) {
  const std::string gpu = "--gpu " + o.estimate.gpu + ": ";
  const engine::GpuPresence device = engine::cuda_device_presence();
  if (!device.available) {
    return make_error(ErrorCode::unsupported, gpu + device.description + "; train on the CPU with --gpu cpu (the default), or plan for the GPU with tessera plan");
  }
  if (!kGpuTrainingBuilt) {
    return make_error(ErrorCode::unsupported, gpu + "a CUDA device is here (" + device.description +
                                                  ") but this build has no GPU training step (CMake found no cuDNN); train on the CPU with --gpu cpu");
  }
  auto index = engine::device_of_local_rank(engine::local_rank_of(world.rank(), world.size(), std::getenv), device.count);
  if (!index) return make_error(index.error().code, gpu + index.error().message);
  return index;
}

// What the engine cannot run yet, named by the option that asks for it; the
// plugin itself is checked against the model (check_data_parallel_supported).
Status check_engine_supports(const EstimateRequest& r, bool on_gpu) {
  if (r.layout.dp_replicate > 1) {
    return make_error(ErrorCode::unsupported, "--dp-replicate " + std::to_string(r.layout.dp_replicate) +
                                                  ": the engine shards over every data-parallel rank; train with --dp-replicate 1");
  }
  if (r.training.recompute == RecomputeMode::op_selective) {
    return make_error(ErrorCode::unsupported, "--recompute op_selective is torchtitan's policy, for estimates of its runs; "
                                              "the engine recomputes none, selective or full");
  }
  if (r.plugin.runtime != Runtime::colossalai) {
    return make_error(ErrorCode::unsupported, "--runtime " + std::string(enum_name(r.plugin.runtime)) +
                                                  ": the engine keeps ColossalAI's model states; use --runtime colossalai");
  }
  // What the engine keeps: the CPU model the tessera profile, the GPU step tessera_gpu (16-bit logits, the tokens on the device).
  const ActivationProfile kept = engine_activation_profile(on_gpu);
  if (r.training.activation_profile != kept) {
    const std::string name(enum_name(kept));
    return make_error(ErrorCode::unsupported, "--activation-profile " + std::string(enum_name(r.training.activation_profile)) + ": " +
                                                  (on_gpu ? "the engine's GPU step" : "the engine") + " keeps the " + name + " profile's activations; use " + name);
  }
  return Status::success();
}

// The layout's ranks against those the launcher started (`ranks`).
Status check_launched_ranks(const planner::ParallelLayout& layout, int ranks) {
  if (layout.world_size() == ranks) return Status::success();
  const std::string sizes = "dp " + std::to_string(layout.dp) + " × tp " + std::to_string(layout.tp) + " × pp " + std::to_string(layout.pp) +
                            (layout.cp > 1 ? " × cp " + std::to_string(layout.cp) : "");
  return make_error(ErrorCode::invalid_argument, sizes + " needs " + std::to_string(layout.world_size()) + " ranks but " +
                                                     (ranks == 1 ? std::string("no launcher started other ranks") : "mpirun started " + std::to_string(ranks)) +
                                                     "; launch with mpirun -np " + std::to_string(layout.world_size()) + " tessera train ...");
}

// The config.json a checkpoint carries: the model's, with the dtype of the
// weights it is saved next to. model.safetensors always holds fp32 (the master
// weights of a mixed-precision run), and without `torch_dtype` transformers
// would not say so. transformers 5 names the field `dtype` and prefers it to
// `torch_dtype` where both are set (5.23.0 configuration_utils.py,
// PreTrainedConfig.__init__), so a `dtype` the model's config carried says fp32 too.
std::string checkpoint_config_text(const std::string& config_text) {
  json config = json::parse(config_text, nullptr, false);
  if (!config.is_object()) return config_text;  // the planner parsed it already; keep it as it is
  config["torch_dtype"] = "float32";
  if (config.contains("dtype")) config["dtype"] = "float32";
  return config.dump(2) + "\n";
}

json space_bytes(const SpaceBytes& bytes) { return json{{"device_bytes", bytes.device}, {"host_bytes", bytes.host}}; }

// `first_rank`: the rank of m.ranks' first row (a dry run holds one rank's).
json metrics_json(const Model& model, const EstimateRequest& request, const engine::TrainMetrics& m, int64_t first_rank = 0,
                  const std::string& device = "cpu") {
  json out{{"schema", 1}, {"kind", "metrics"}, {"device", device}, {"model", model_to_json(model)}};
  out.update(request_to_json(request));
  // One row per rank, in rank order: each category's own peak, per memory space.
  const std::vector<engine::RankPeaks> ranks = m.ranks.empty() ? std::vector<engine::RankPeaks>{engine::rank_peaks(m.ledger)} : m.ranks;
  out["ranks"] = json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    json categories = json::object();
    for (MemoryCategory c : kAllMemoryCategories) categories[std::string(to_string(c))] = space_bytes(ranks[r].peaks[c]);
    const int64_t rank = first_rank + static_cast<int64_t>(r);
    out["ranks"].push_back(json{{"ranks", json::array({rank, rank})}, {"categories", categories}, {"total", space_bytes(ranks[r].total)}});
  }
  // Rank 0's peak of the total, with each category's bytes at that moment
  // (the per-category peaks above need not coincide).
  json at_peak = json::object();
  const auto& breakdown = m.ledger.breakdown_at_peak(MemorySpace::device);
  for (MemoryCategory c : kAllMemoryCategories) at_peak[std::string(to_string(c))] = breakdown[static_cast<size_t>(c)];
  out["peak_total"] = json{{"device_bytes", m.ledger.peak_total(MemorySpace::device)}, {"categories_at_peak", at_peak}};
  // Rank 0's calls and payload bytes per collective over the run (comm_types.h
  // defines the payload), the time it waited in them and the time they were in
  // flight (longer where a call ran under compute: DDP's buckets in backward).
  const auto counters_json = [](const engine::comm::CommCounters& counters) {
    json collectives = json::object();
    for (const auto& entry : engine::comm::kCollectiveNames) {
      collectives[std::string(entry.name)] = json{{"calls", counters.calls_of(entry.value)},
                                                  {"bytes", counters.bytes_of(entry.value)},
                                                  {"seconds", counters.seconds_of(entry.value)},
                                                  {"in_flight_seconds", counters.in_flight_seconds_of(entry.value)}};
    }
    return collectives;
  };
  out["communication"] = counters_json(m.communication);  // in rank 0's data-parallel group
  if (request.layout.tp > 1) out["tensor_parallel_communication"] = counters_json(m.tensor_parallel_communication);
  if (request.layout.pp > 1) out["pipeline_parallel_communication"] = counters_json(m.pipeline_parallel_communication);
  if (request.layout.cp > 1) out["context_parallel_communication"] = counters_json(m.context_parallel_communication);
  out["chunk_moves"] = m.chunk_moves;
  out["loss"] = m.loss;
  out["grad_norm"] = m.grad_norm;  // null where an fp16 step was skipped
  out["loss_scale"] = m.loss_scale;
  out["skipped_steps"] = m.skipped_steps;
  out["step_time_s"] = m.step_time_s;
  out["tokens_per_s"] = m.tokens_per_s;
  out["achieved_flops_per_s"] = m.achieved_flops_per_s;
  return out;
}

}  // namespace

TrainCliOptions::TrainCliOptions() {
  estimate.model = "tiny-gpt2";
  estimate.gpu = "cpu";
  estimate.precision = "fp32";
  estimate.activation_profile = std::string(enum_name(ActivationProfile::tessera));  // what the engine keeps
  estimate.request.training.micro_batch_size = 4;
  estimate.request.training.seq_len = 64;
}

void add_train_options(CLI::App& c, TrainCliOptions& o) {
  add_estimate_options(c, o.estimate);
  // The GPU runtime's sizes and the report's format do not apply to a CPU run.
  for (const char* name : {"--cuda-context-mib", "--nccl-mib", "--cublas-workspace-mib", "--fragmentation", "--memory-headroom", "--format", "--output"}) {
    c.remove_option(c.get_option(name));
  }
  c.get_option("--model")->required(false)->description("Shipped model name or config.json (gpt2 and llama-style families)");
  c.get_option("--gpu")->description("cpu: train on the CPU; a GPU's name: one GPU, or one per rank under mpirun (DDP, ZeRO-1/2, FSDP, Gemini, or --tp or --pp with --plugin hybrid_parallel), bf16 (the default there; where CUDA and cuDNN were built in)");
  c.add_option("--out", o.out, "Directory for plan.json, metrics.json and the checkpoint")->required();
  c.add_option("--data", o.data, "Training text (bytes) or llm.c .bin token shard (default: the shipped text, under $TESSERA_DATA_DIR where set)");
  c.add_option("--steps", o.steps, "Optimizer steps")->capture_default_str();
  c.add_option("--lr", o.learning_rate, "Learning rate")->capture_default_str();
  c.add_option("--seed", o.seed, "Seed of the initialisation")->capture_default_str();
  c.add_option("--loss-scale", o.loss_scale, "fp16: initial dynamic loss scale")->capture_default_str();
  c.add_option("--loss-scale-window", o.loss_scale_window, "fp16: overflow-free steps before the loss scale doubles")->capture_default_str();
  c.add_option("--hysteresis", o.hysteresis, "fp16: overflowing steps before the loss scale halves")->capture_default_str();
  c.add_flag("--resume", o.resume, "Continue from the checkpoint in --out up to --steps (from step 1 where it holds none yet)");
  c.add_flag("--allow-changes", o.allow_changes, "With --resume: continue although precision, batch shape, data, model or --lr differ from the checkpoint's");
  c.add_option("--save-every", o.save_every, "Also save the checkpoint and metrics.json every N steps");
  c.add_option("--plan", o.plan, "Train the best plan of a plan.json (model, micro-batch, sequence, accumulation, precision, recompute, optimizer, layout, plugin; on the CPU or with --gpu)");
  c.add_option("--plan-number", o.plan_number, "With --plan: which plan of the file, 1 (the best) by default, as tessera export and compare's --plan");
  c.add_flag("--dry-run", o.dry_run, "Replay one rank's allocations of one step at the plan's full size (no data, no arithmetic) into metrics.json");
  c.add_option("--rank", o.rank, "With --dry-run: the rank to replay")->capture_default_str();
  c.add_option("--device-memory", o.device_memory_mib,
               "MiB: give the device memory space a capacity, as a GPU of that size (Gemini's auto placement solves against it, and "
               "an allocation past it fails; with --gpu it caps the caching allocator); 0: none")
      ->capture_default_str();
  c.add_option("--comm-timeout", o.comm_timeout_s,
               "Seconds a rank waits for the others in one collective before it stops with an error naming the call (a dead or stuck rank)")
      ->capture_default_str();
}

std::set<std::string> given_options(const CLI::App& command) {
  std::set<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() > 0) names.insert(option->get_name());
  }
  return names;
}

// The engine's options from the command line's, checked.
Result<engine::TrainOptions> engine_options(const TrainCliOptions& o) {
  const planner::TrainingOptions& training = o.estimate.request.training;
  engine::TrainOptions t;
  t.micro_batch_size = training.micro_batch_size;
  t.seq_len = training.seq_len;
  t.num_micro_batches = training.num_micro_batches;
  t.recompute = training.recompute;
  t.recompute_num_layers = training.recompute_num_layers;
  t.precision = training.precision;
  t.optimizer.kind = training.optimizer;
  t.plugin = o.estimate.request.plugin;
  t.save_every = o.save_every;
  t.steps = o.steps;
  t.seed = o.seed;
  t.optimizer.learning_rate = o.learning_rate;
  t.loss_scaler.initial_scale = o.loss_scale;
  t.loss_scaler.growth_interval = o.loss_scale_window;
  t.loss_scaler.hysteresis = o.hysteresis;
  t.resume = o.resume;
  t.allow_changes = o.allow_changes;
  t.data_path = o.data.empty() ? shipped_text_path() : o.data;
  if (!(o.device_memory_mib >= 0)) return make_error(ErrorCode::invalid_argument, "--device-memory must be 0 (no capacity) or a number of MiB, e.g. 64");
  t.device_capacity_bytes = std::llround(o.device_memory_mib * 1024 * 1024);
  if (training.precision == Precision::fp8) {
    return make_error(ErrorCode::unsupported, "--precision fp8: Tessera's engine runs on the CPU, which has no FP8 GEMMs; train with --precision bf16");
  }
  if (o.out.empty()) return make_error(ErrorCode::invalid_argument, "--out must name a directory for the checkpoint and metrics, e.g. --out run");
  if (o.steps <= 0) return make_error(ErrorCode::invalid_argument, "--steps must be a positive integer");
  if (o.save_every < 0) return make_error(ErrorCode::invalid_argument, "--save-every must be a positive number of steps (or 0: only at the end)");
  if (o.allow_changes && !o.resume) return make_error(ErrorCode::invalid_argument, "--allow-changes applies to --resume only");
  if (!(o.learning_rate > 0 && std::isfinite(o.learning_rate))) return make_error(ErrorCode::invalid_argument, "--lr must be a positive number");
  if (training.precision != Precision::fp16) {
    for (const char* name : kLossScalerOptions) {
      if (o.given.contains(name)) {
        return make_error(ErrorCode::invalid_argument, std::string(name) + " applies to --precision fp16 only (this run is " + o.estimate.precision + ")");
      }
    }
  }
  if (!(o.loss_scale >= 1 && std::isfinite(o.loss_scale))) return make_error(ErrorCode::invalid_argument, "--loss-scale must be a number of at least 1, e.g. 65536");
  if (o.loss_scale_window <= 0) return make_error(ErrorCode::invalid_argument, "--loss-scale-window must be a positive number of steps");
  if (o.hysteresis <= 0) return make_error(ErrorCode::invalid_argument, "--hysteresis must be a positive number of overflowing steps");
  return t;
}

// The pre-flight memory check: the planner's estimate of the run plus the
// tokens the data will take, against what this machine lets the process have
// (engine/host_memory.h: available memory, cgroup and ulimit limits, a reserve).
Status check_memory(const std::string& model_name, const MemoryEstimate& estimate, int64_t data_bytes) {
  const engine::HostMemoryBudget budget = engine::host_memory_budget();
  const RankMemory& rank = estimate.tightest();
  const int64_t model_bytes = rank.device_total;
  if (model_bytes + data_bytes <= budget.usable_bytes()) return Status::success();
  // Where the model states alone do not fit, a smaller micro-batch or recompute cannot help.
  int64_t states = 0;
  for (MemoryCategory c : {MemoryCategory::parameters, MemoryCategory::master_weights, MemoryCategory::gradients, MemoryCategory::optimizer_states}) {
    states += rank.bytes[c].device;
  }
  const std::string advice = states + data_bytes > budget.usable_bytes()
                                 ? "its parameters, gradients and optimizer states alone take " + format_bytes(states) +
                                       ": shard them over more ranks (mpirun -np N tessera train --plugin low_level_zero --dp N) or train a smaller model"
                                 : "lower --micro-batch or --seq, or use --recompute full";
  return make_error(ErrorCode::invalid_argument, "--model " + model_name + " needs " + format_bytes(model_bytes + data_bytes) + " (" +
                                                     format_bytes(model_bytes) + " as plan.json estimates, " + format_bytes(data_bytes) +
                                                     " of data) but " + format_bytes(std::max<int64_t>(0, budget.usable_bytes())) +
                                                     " is usable here (" + budget.limited_by + ": " + format_bytes(budget.limit_bytes) +
                                                     ", less a reserve of " + format_bytes(budget.reserve_bytes) + "); " + advice);
}

// What the user reads when --resume finds the checkpoint at --steps or past it.
std::string nothing_to_train_line(const engine::TrainMetrics& m, const std::string& out_dir, int64_t steps) {
  const int64_t at = m.first_step - 1;
  return "nothing to train: the checkpoint in " + out_dir + " is at step " + std::to_string(at) +
         (at > steps ? ", past --steps " + std::to_string(steps) + "; give a larger --steps to train on" : ", the --steps asked for") + "\n";
}

// What the user reads when a signal stopped the run.
std::string stopped_line(int signal_number, const engine::TrainMetrics& m, const std::string& out_dir) {
  const int64_t last = m.first_step + static_cast<int64_t>(m.loss.size()) - 1;
  std::string line = std::string("stopped by ") + signal_name(signal_number) + " after step " + std::to_string(last) + ": ";
  if (m.checkpoint_step == 0) return line + "no step was complete, so nothing was saved";
  return line + "the checkpoint in " + out_dir + " is at step " + std::to_string(m.checkpoint_step) + " (metrics.json written); continue with --resume";
}

// The run's device as the planner sees it (this CPU, or the GPU --gpu
// names), as one of --device-memory's size where that gives one
// (TrainOptions::device_capacity_bytes).
GpuProfile run_profile(GpuProfile device, const engine::TrainOptions& t) {
  if (t.device_capacity_bytes > 0) {
    device.memory_bytes = t.device_capacity_bytes;
    device.usable_memory_bytes = t.device_capacity_bytes - device.cuda_context_bytes;
  }
  return device;
}

// With --device-memory, a plan that needs more of the device than it has is
// refused before the first step, naming both (the ledger would fail mid-step).
Status check_device_memory(const engine::TrainOptions& t, const MemoryEstimate& estimate) {
  const int64_t capacity = t.device_capacity_bytes, needed = estimate.tightest().device_total;
  if (capacity <= 0) return Status::success();
  if (needed <= capacity) return Status::success();
  return make_error(ErrorCode::invalid_argument, "--device-memory " + format_bytes(capacity) + ": the plan needs " + format_bytes(needed) +
                                                     " of device memory (tessera estimate shows where); give more, or offload (--plugin gemini "
                                                     "--placement auto or cpu, --cpu-offload)");
}

// Gemini's `auto` placement is what the planner solved for this run's device
// (estimate_memory: the fewest leading parameter chunks on the host that keep
// the device under its share, every optimizer state on the host); the engine
// runs it as a static placement with every optimizer state on the host and
// those parameter chunks there.
void resolve_auto_placement(const MemoryEstimate& estimate, engine::TrainOptions& t) {
  PluginOptions& plugin = t.plugin;
  if (plugin.kind != PluginKind::gemini || plugin.gemini.placement_policy != GeminiPlacement::auto_placement || !estimate.gemini) return;
  const std::vector<bool>& on_host = estimate.gemini->parameters_on_host;
  plugin.gemini.placement_policy = GeminiPlacement::static_placement;
  plugin.gemini.shard_param_frac = 1;
  plugin.gemini.offload_optim_frac = 1;
  plugin.gemini.offload_param_frac = 0;
  t.gemini_parameter_chunks_on_host = std::count(on_host.begin(), on_host.end(), true);
}

// `tessera train --dry-run`: rank --rank of the plan's world, replayed alone
// (engine::dry_run); DIR gets config.json, plan.json and metrics.json, no checkpoint.
int run_dry_run(const TrainCliOptions& o, const Model& model, const engine::TrainOptions& options, std::ostream& out, std::ostream& err) {
  const EstimateRequest request = engine::cpu_run_request(o.estimate.request, model.config);
  const int64_t ranks = request.layout.world_size();
  if (o.rank < 0 || o.rank >= ranks) {
    return fail(err, "--rank " + std::to_string(o.rank) + ": the plan has ranks 0 to " + std::to_string(ranks - 1) + "; give one of them");
  }
  const GpuProfile cpu = run_profile(host_cpu_profile(), options);
  auto estimate = estimate_memory(model, cpu, request);
  if (!estimate) return fail(err, estimate.error().message);
  engine::TrainOptions t = options;
  resolve_auto_placement(estimate.value(), t);
  if (Status s = engine::check_data_parallel_supported(t.plugin, t.precision, model, request.layout.data_ranks()); !s) return fail(err, s.error().message);
  auto config_text = model_config_text(o.estimate.model);
  if (!config_text) return fail(err, config_text.error().message);
  config_text = checkpoint_config_text(config_text.value());
  auto run_directory = engine::RunDirectory::open(o.out);
  if (!run_directory) return fail(err, run_directory.error().message);
  const EstimateReport report{model, cpu, request, estimate.value()};
  if (Status s = write_file_atomically(o.out + "/config.json", config_text.value(), "--out"); !s) return fail(err, s.error().message);
  if (Status s = write_file_atomically(o.out + "/plan.json", estimate_to_json(report).dump(2) + "\n", "--out"); !s) return fail(err, s.error().message);
  // This rank's groups as the plan lays them out (planner/rank_groups.h), answered locally.
  const planner::RankCoordinates at = planner::rank_coordinates(request.layout, o.rank);
  // Gradients reduce over the data- and context-parallel ranks together (ProcessGroups::data_context).
  const auto data_group = engine::comm::make_dry_run_communicator(static_cast<int>(planner::data_context_rank(request.layout, o.rank)),
                                                                  static_cast<int>(request.layout.data_ranks()));
  const auto context_group = engine::comm::make_dry_run_communicator(static_cast<int>(at.cp_rank), static_cast<int>(request.layout.cp));
  const auto tensor_group = engine::comm::make_dry_run_communicator(static_cast<int>(at.tp_rank), static_cast<int>(request.layout.tp));
  const auto pipeline_group = engine::comm::make_dry_run_communicator(static_cast<int>(at.pp_rank), static_cast<int>(request.layout.pp));
  t.data_parallel_group = data_group.get();
  t.tensor_parallel_group = tensor_group.get();
  t.pipeline_parallel_group = pipeline_group.get();
  t.context_parallel_group = context_group.get();
  t.pipeline_schedule = request.plugin.pp_schedule;
  t.model_chunks = request.plugin.model_chunks();
  t.sequence_parallel = request.layout.sequence_parallel;
  auto metrics = engine::dry_run(model, t);
  if (!metrics) return fail(err, metrics.error().message);
  if (Status s = write_file_atomically(o.out + "/metrics.json", metrics_json(model, request, metrics.value(), o.rank).dump(2) + "\n", "--out"); !s) {
    return fail(err, s.error().message);
  }
  out << "dry run of rank " << o.rank << " of " << ranks << " (" << enum_name(request.plugin.kind) << ", " << enum_name(request.training.precision)
      << "): peak " << format_bytes(metrics->ranks.front().total.device) << " on the device, " << format_bytes(metrics->ranks.front().total.host)
      << " on the host; wrote " << o.out << "/plan.json and metrics.json (tessera compare " << o.out << "/plan.json " << o.out << "/metrics.json)\n";
  return kExitOk;
}

// Rank 0 opens --out (one writer per directory, from here to the end of the
// run) and writes `files` into it; every rank learns whether that worked
// (collective), so that a rank failing its pre-flight alone does not leave
// the others waiting in the first collective. Rank 0 gets the directory.
Result<std::optional<engine::RunDirectory>> open_run_directory(const std::string& out, engine::comm::Communicator& world,
                                                               const std::function<Status()>& files) {
  std::optional<engine::RunDirectory> run_directory;
  Status prepared = Status::success();
  if (world.rank() == 0) {
    auto opened = engine::RunDirectory::open(out);
    if (!opened) {
      prepared = opened.error();
    } else {
      run_directory.emplace(std::move(opened).value());
      prepared = files();
    }
  }
  if (world.size() > 1) {
    auto ready = engine::all_ranks_agree(world, prepared.ok());
    if (!ready) return ready.error();
    if (!ready.value() && prepared) return make_error(ErrorCode::io_error, "rank 0 could not prepare --out " + out + " (its message says why)");
  }
  if (!prepared) return prepared.error();
  return run_directory;
}

// `tessera train --gpu NAME` (settled by settle_train_options): the planner's
// estimate of the run on that GPU (or one of --device-memory's size) first,
// which --device-memory must hold and Gemini's `auto` placement is solved
// from; then this rank's device (find_gpu_device) and the GPU training step's
// steps on it, DDP or ZeRO over `world` where the launcher started several
// ranks; rank 0 holds DIR, commits the checkpoints there (the CPU engine's
// files, so either resumes the other's) and writes config.json, plan.json
// (the estimate), metrics.json (device: the GPU) and, with --plan, predicted_trace.json.
int run_on_gpu(const TrainCliOptions& o, const std::optional<TrainedPlan>& planned, const Model& model, engine::TrainOptions t,
               engine::comm::Communicator& world, std::ostream& progress, std::ostream& err, const std::string& who) {
  auto failed = [&](const std::string& message) { return fail(err, who + message); };
  auto profile = load_gpu(o.estimate.gpu);
  if (!profile) return failed(profile.error().message);
  const GpuProfile gpu = run_profile(profile.value(), t);
  const EstimateRequest request = gpu_request(o.estimate.request);
  auto estimate = estimate_memory(model, gpu, request);
  if (!estimate) return failed(estimate.error().message);
  if (Status s = check_device_memory(t, estimate.value()); !s) return failed(s.error().message);
  resolve_auto_placement(estimate.value(), t);  // Gemini `auto`: the planner's solution for this GPU, run as its static placement
  if (planned && world.rank() == 0) {
    if (const std::string warning = other_gpu_warning(*planned, o.plan, gpu); !warning.empty()) err << "tessera: warning: " + warning + "\n";
  }
  auto device = find_gpu_device(o, world);
  if (!device) return failed(device.error().message);
#if defined(TESSERA_HAVE_CUDNN)
  auto config_text = model_config_text(o.estimate.model);
  if (!config_text) return failed(config_text.error().message);
  t.model_config_text = checkpoint_config_text(config_text.value());
  auto run_directory = open_run_directory(o.out, world, [&] {
    const EstimateReport report{model, gpu, request, estimate.value()};
    Status written = write_file_atomically(o.out + "/config.json", t.model_config_text, "--out");
    if (written) written = write_file_atomically(o.out + "/plan.json", estimate_to_json(report).dump(2) + "\n", "--out");
    if (written && planned) written = write_predicted_trace(o.plan, o.plan_number, o.out + "/predicted_trace.json");
    return written;
  });
  if (!run_directory) return failed(run_directory.error().message);
  if (world.rank() == 0) {
    t.run_directory = &run_directory.value().value();
  } else {
    t.run_directory_path = o.out;
  }
  const StopSignals signals;
  t.stop_requested = [&signals] { return signals.received() != 0; };
  t.sequence_parallel = o.estimate.request.layout.sequence_parallel;
  t.pipeline_schedule = o.estimate.request.plugin.pp_schedule;
  t.model_chunks = o.estimate.request.plugin.model_chunks();
  const engine::cuda::GpuRun run{device.value(),
                                 &world,
                                 std::chrono::duration<double>(o.comm_timeout_s),
                                 o.estimate.request.layout.tp,
                                 o.estimate.request.layout.pp,
                                 o.estimate.request.layout.cp};
  auto metrics = engine::cuda::train_on_gpu(model, t, run, progress);
  if (!metrics) return failed(metrics.error().message);
  const std::string name = engine::cuda_device_presence().description;
  if (world.rank() == 0) {
    if (Status s = write_file_atomically(o.out + "/metrics.json", metrics_json(model, o.estimate.request, metrics.value(), 0, name).dump(2) + "\n", "--out");
        !s) {
      return failed(s.error().message);
    }
  }
  if (metrics->stopped) {
    err << "tessera: " + who + stopped_line(signals.received(), metrics.value(), o.out) + "\n";
    return 128 + signals.received();
  }
  if (world.rank() != 0) return kExitOk;
  if (metrics->loss.empty()) {
    progress << nothing_to_train_line(metrics.value(), o.out, o.steps);
    return kExitOk;
  }
  const planner::ParallelLayout& layout = o.estimate.request.layout;
  const std::string parallel = o.estimate.request.plugin.kind == PluginKind::low_level_zero
                                   ? "ZeRO-" + std::to_string(o.estimate.request.plugin.effective_zero_stage())
                               : layout.tp > 1 || layout.pp > 1
                                   ? (layout.tp > 1 ? "tp " + std::to_string(layout.tp) + " × " : "") +
                                         (layout.pp > 1 ? "pp " + std::to_string(layout.pp) + " × " : "") + "dp " + std::to_string(layout.dp) + ", " +
                                         (layout.pp > 1 ? std::string(enum_name(o.estimate.request.plugin.pp_schedule)) + ", " : "") + "DDP"
                                   : "DDP";
  const std::string where = world.size() == 1 ? "one GPU (" + name + ")" : std::to_string(world.size()) + " GPUs (" + name + ", " + parallel + ")";
  char line[300];
  std::snprintf(line, sizeof line, "trained steps %lld-%lld in bf16 on %s: loss %.4f -> %.4f, %.0f tokens/s, %.2f GFLOP/s\n",
                static_cast<long long>(metrics->first_step), static_cast<long long>(o.steps), where.c_str(), metrics->loss.front(), metrics->loss.back(),
                metrics->tokens_per_s, metrics->achieved_flops_per_s / 1e9);
  progress << line << "wrote " << o.out << "/checkpoint (step " << metrics->checkpoint_step << "), config.json, plan.json and metrics.json"
           << (planned ? plan_files_note(*planned, true) : "") << "\n";
  return kExitOk;
#else
  (void)progress;
  return failed("--gpu " + o.estimate.gpu + ": this build has no GPU training step");  // find_gpu_device refused it already
#endif
}

Result<std::optional<TrainedPlan>> settle_train_options(TrainCliOptions& o, int launched_ranks) {
  if (Status s = check_given_options(o); !s) return s.error();
  const bool on_gpu = o.estimate.gpu != "cpu";
  if (on_gpu && o.dry_run) {
    return make_error(ErrorCode::unsupported, "--dry-run replays the CPU engine's allocations (its tessera activations, no CUDA context, cuBLAS or NCCL buffers), "
                                              "not the GPU step's; leave out --gpu");
  }
  std::optional<TrainedPlan> planned;
  if (!o.plan.empty()) {
    auto plan = apply_plan(o.plan, o.plan_number, o.estimate, on_gpu);
    if (!plan) return plan.error();
    planned = std::move(plan).value();
  }
  // The GPU step trains bf16 mixed precision only and keeps the tessera_gpu
  // profile's activations: on a GPU those are the defaults (the CPU's: fp32, tessera).
  if (on_gpu && !planned && !o.given.contains("--precision")) o.estimate.precision = std::string(enum_name(Precision::bf16));
  if (on_gpu && !o.given.contains("--activation-profile")) o.estimate.activation_profile = std::string(enum_name(ActivationProfile::tessera_gpu));
  if (Status s = o.estimate.finish(); !s) return s.error();
  if (planned) {
    o.estimate.request.layout = planned->request.layout;
    o.estimate.request.plugin = planned->request.plugin;
  } else if (!o.given.contains("--dp") && !o.dry_run) {
    // The ranks the launcher started that tp × pp × cp leave: data-parallel
    // (where they do not divide, check_launched_ranks says what to launch).
    const planner::ParallelLayout& l = o.estimate.request.layout;
    o.estimate.request.layout.dp = std::max<int64_t>(1, launched_ranks / (l.tp * l.pp * l.cp));
  }
  // What the engine does not run, said as the plan's where the plan set it.
  Status supported = check_engine_supports(o.estimate.request, on_gpu);
  if (supported && on_gpu) supported = check_gpu_settings(o);
  if (!supported) return planned ? plan_setting_refused(o.plan, supported.error()) : supported.error();
  const int ranks = o.dry_run ? static_cast<int>(o.estimate.request.layout.world_size()) : launched_ranks;
  if (Status s = check_launched_ranks(o.estimate.request.layout, ranks); !s) return s.error();
  return planned;
}

int run_train(const TrainCliOptions& given, std::ostream& out, std::ostream& err) {
  if (given.dry_run && started_by_launcher()) return fail(err, "--dry-run replays one rank alone (choose it with --rank); run it without mpirun");
  if (given.given.contains("--rank") && !given.dry_run) return fail(err, "--rank applies to --dry-run only; under mpirun each rank knows its own");
  if (!(given.comm_timeout_s > 0)) return fail(err, "--comm-timeout must be a positive number of seconds, e.g. 300");
  auto launched = given.dry_run ? Result<LaunchedRanks>(LaunchedRanks{nullptr, engine::comm::make_local_communicator()})
                                : join_launched_ranks(given.comm_timeout_s);
  if (!launched) return fail(err, launched.error().message);
  engine::comm::Communicator& world = *launched->world;
  const bool leader = world.rank() == 0;
  // On several ranks each line says whose it is; rank 0 alone prints progress and writes the files.
  const std::string who = world.size() > 1 ? "rank " + std::to_string(world.rank()) + " of " + std::to_string(world.size()) + ": " : "";
  std::ostringstream discarded;
  std::ostream& progress = leader ? out : discarded;
  auto failed = [&](const std::string& message) { return fail(err, who + message); };

  TrainCliOptions o = given;
  auto settled = settle_train_options(o, world.size());
  if (!settled) return failed(settled.error().message);
  const std::optional<TrainedPlan>& planned = settled.value();
  const bool on_gpu = o.estimate.gpu != "cpu";
  auto options = engine_options(o);
  if (!options) return failed(options.error().message);
  engine::TrainOptions t = std::move(options).value();
  auto model = load_model(o.estimate.model);
  if (!model) return failed(model.error().message);
  // Everything that can fail is checked before the first step: the model, memory, data, the output directory.
  if (Status s = engine::check_engine_computes(model->config, t.seq_len); !s) return failed(s.error().message);
  if (on_gpu) return run_on_gpu(o, planned, model.value(), t, world, progress, err, who);
  if (o.dry_run) return run_dry_run(o, model.value(), t, out, err);
  const EstimateRequest request = engine::cpu_run_request(o.estimate.request, model->config);
  const GpuProfile cpu = run_profile(host_cpu_profile(), t);
  auto estimate = estimate_memory(model.value(), cpu, request);
  if (!estimate) return failed(estimate.error().message);
  if (Status s = check_device_memory(t, estimate.value()); !s) return failed(s.error().message);
  resolve_auto_placement(estimate.value(), t);
  if (Status s = engine::check_data_parallel_supported(t.plugin, t.precision, model.value(), request.layout.data_ranks()); !s) return failed(s.error().message);
  auto data_bytes = engine::token_memory_bytes(t.data_path);
  if (!data_bytes) return failed(data_bytes.error().message);
  if (Status s = check_memory(o.estimate.model, estimate.value(), data_bytes.value()); !s) return failed(s.error().message);
  auto config_text = model_config_text(o.estimate.model);
  if (!config_text) return failed(config_text.error().message);
  config_text = checkpoint_config_text(config_text.value());
  // config.json next to model.safetensors: transformers' from_pretrained(--out) loads the checkpoint.
  auto run_directory = open_run_directory(o.out, world, [&] {
    const EstimateReport report{model.value(), cpu, request, estimate.value()};
    Status written = write_file_atomically(o.out + "/config.json", config_text.value(), "--out");
    if (written) written = write_file_atomically(o.out + "/plan.json", estimate_to_json(report).dump(2) + "\n", "--out");
    if (written && !o.plan.empty()) written = write_predicted_trace(o.plan, o.plan_number, o.out + "/predicted_trace.json");
    return written;
  });
  if (!run_directory) return failed(run_directory.error().message);
  if (leader) {
    t.run_directory = &run_directory.value().value();
  } else {
    t.run_directory_path = o.out;
  }
  // The plan's groups, in the planner's rank order (process_groups.h).
  auto groups = engine::make_process_groups(world, request.layout);
  if (!groups) return failed(groups.error().message);
  t.data_parallel_group = groups->data_context.get();
  t.tensor_parallel_group = groups->tensor.get();
  t.pipeline_parallel_group = groups->pipeline.get();
  t.context_parallel_group = groups->context.get();
  t.pipeline_schedule = request.plugin.pp_schedule;
  t.model_chunks = request.plugin.model_chunks();
  t.sequence_parallel = request.layout.sequence_parallel;
  t.world_group = &world;
  t.model_config_text = config_text.value();
  t.on_save = [&](const engine::TrainMetrics& m) -> Status {
    if (Status s = write_file_atomically(o.out + "/metrics.json", metrics_json(model.value(), request, m).dump(2) + "\n", "--out"); !s) return s;
    if (m.timelines.empty()) return Status::success();
    return write_file_atomically(o.out + "/trace.json", measured_trace_json(m.timelines, request.layout, o.out), "--out");
  };
  const StopSignals signals;
  t.stop_requested = [&signals] { return signals.received() != 0; };
  const bool terminal = leader && isatty(fileno(stdout)) != 0;
  auto metrics = engine::train(model.value(), t, progress, terminal);
  if (!metrics) return failed(metrics.error().message);
  if (metrics->stopped) {
    err << (terminal ? "\n" : "") << "tessera: " << who << stopped_line(signals.received(), metrics.value(), o.out) << "\n";
    return 128 + signals.received();
  }
  char line[200];
  if (metrics->loss.empty()) {
    progress << nothing_to_train_line(metrics.value(), o.out, o.steps);
    return kExitOk;
  }
  std::snprintf(line, sizeof line, "trained steps %lld-%lld in %s on %d rank%s: loss %.4f -> %.4f, %.0f tokens/s, %.2f GFLOP/s\n",
                static_cast<long long>(metrics->first_step), static_cast<long long>(o.steps), o.estimate.precision.c_str(), world.size(),
                world.size() == 1 ? "" : "s", metrics->loss.front(), metrics->loss.back(), metrics->tokens_per_s, metrics->achieved_flops_per_s / 1e9);
  progress << line;
  if (!metrics->skipped_steps.empty()) progress << metrics->skipped_steps.size() << " step(s) skipped on fp16 gradient overflow\n";
  progress << "wrote " << o.out << "/checkpoint (step " << metrics->checkpoint_step << "), config.json, plan.json, metrics.json and trace.json"
           << (planned ? plan_files_note(*planned, false) : "") << "\n";
  return kExitOk;
}

}  // namespace tessera::cli
