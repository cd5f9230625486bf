// `tessera export`: plans searched in-process, written as plan.json, read back,
// and exported. The DeepSpeed config must carry the plan's values, the Perfetto
// trace must end where the simulated step ends, and the ColossalAI script must
// contain the plugin call with the plan's settings and compile.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "tessera/planner/export.h"
#include "tessera/planner/json_io.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/search.h"
#include "tessera/planner/text_util.h"
#include "planned.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using nlohmann::json;

json deepspeed_config(const Planned& planned, size_t index) {
  auto text = export_deepspeed(planned.file, index);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  if (!text.ok()) return json();
  try {
    return json::parse(text.value());
  } catch (const json::exception& e) {
    ADD_FAILURE() << "ds_config.json does not parse: " << e.what();
    return json();
  }
}

void expect_deepspeed_batch(const Planned& planned, size_t index, const json& ds) {
  const EstimateRequest& r = planned.file.plans[index];
  const int64_t accumulation = r.layout.pp > 1 ? 1 : r.training.num_micro_batches;
  EXPECT_EQ(ds.at("train_micro_batch_size_per_gpu").get<int64_t>(), r.training.micro_batch_size);
  EXPECT_EQ(ds.at("gradient_accumulation_steps").get<int64_t>(), accumulation);
  EXPECT_EQ(ds.at("train_batch_size").get<int64_t>(), r.training.micro_batch_size * accumulation * r.layout.dp);
  EXPECT_EQ(ds.at("train_batch_size").get<int64_t>(), planned.file.global_batch_size);
  EXPECT_EQ(ds.at("gradient_clipping").get<double>(), 1.0);
  EXPECT_EQ(ds.at("log_level"), "info") << "the throughput lines tessera compare reads";
  EXPECT_TRUE(ds.at("bf16").at("enabled").get<bool>());
  EXPECT_EQ(ds.at("optimizer").at("type"), "AdamW");
}

// The trace parses, its X events end where the simulator's step ends, and its lanes are named.
void expect_perfetto_trace(const Planned& planned, size_t index) {
  auto text = export_perfetto(planned.file, index);
  ASSERT_TRUE(text.ok()) << text.error().message;
  json trace;
  ASSERT_NO_THROW(trace = json::parse(text.value()));
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");

  const EstimateRequest& r = planned.file.plans[index];
  auto memory = estimate_memory(planned.model, planned.file.cluster.gpu, r);
  ASSERT_TRUE(memory.ok());
  auto simulation = simulate_step(planned.model, planned.file.cluster, r, memory.value(), SimulationSettings{}, false);
  ASSERT_TRUE(simulation.ok());
  const double step = simulation->step_time_s;

  double last_end_us = 0;
  int x_events = 0;
  std::set<std::string> thread_names;
  for (const json& e : trace["traceEvents"]) {
    if (e.at("ph") == "X") {
      ++x_events;
      EXPECT_EQ(e.at("pid"), 1);
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      last_end_us = std::max(last_end_us, e.at("ts").get<double>() + e.at("dur").get<double>());
    } else if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      thread_names.insert(e.at("args").at("name").get<std::string>());
    }
  }
  EXPECT_GE(x_events, 2 * r.training.num_micro_batches * r.layout.pp);
  EXPECT_NEAR(last_end_us / 1e6, step, 1e-6 * step);
  EXPECT_NEAR(last_end_us / 1e6, planned.candidates[index].simulation.step_time_s, 1e-6 * step) << "the plan file's step time";
  EXPECT_NEAR(trace.at("otherData").at("step_time_s").get<double>(), step, 1e-6 * step);
  EXPECT_GT(trace.at("otherData").at("tokens_per_s").get<double>(), 0.0);
  for (int64_t stage = 0; stage < r.layout.pp; ++stage) {
    EXPECT_TRUE(thread_names.contains("stage " + std::to_string(stage) + " compute")) << stage;
    EXPECT_TRUE(thread_names.contains("stage " + std::to_string(stage) + " communication")) << stage;
  }
  EXPECT_EQ(thread_names.size(), static_cast<size_t>(2 * r.layout.pp));
}

std::string colossalai_script(const Planned& planned, size_t index) {
  auto text = export_colossalai(planned.file, index);
  EXPECT_TRUE(text.ok()) << (text.ok() ? "" : text.error().message);
  return text.ok() ? text.value() : "";
}

// `python3 -m py_compile` on the script; skips when there is no python3.
void expect_python_compiles(const std::string& script, const std::string& name) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not on PATH: the script's syntax is not checked";
  // A directory of its own: py_compile writes the .pyc into __pycache__ beside
  // the script, and tests running at once must not remove each other's.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tessera_export_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / "train.py";
  {
    std::ofstream out(path, std::ios::binary);
    out << script;
  }
  const std::string command = "python3 -m py_compile '" + path.string() + "' 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << "the generated script does not compile:\n" << script;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Export, DdpPlan) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_ddp}; });
  ASSERT_FALSE(planned.file.plans.empty());
  const EstimateRequest& r = planned.file.plans[0];
  ASSERT_EQ(r.plugin.kind, PluginKind::torch_ddp);

  // DeepSpeed without ZeRO all-reduces after backward in 500M-element buffers, not DDP's overlapped buckets.
  auto refused = export_deepspeed(planned.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "--to deepspeed: the plan's torch_ddp all-reduces gradients in 25 MiB buckets overlapped with backward"))
      << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "pick a ZeRO plan (--plugin low_level_zero)")) << refused.error().message;

  expect_perfetto_trace(planned, 0);

  const std::string script = colossalai_script(planned, 0);
  EXPECT_TRUE(contains(script, "    plugin = TorchDDPPlugin(bucket_cap_mb=25, gradient_as_bucket_view=False)\n")) << script;
  EXPECT_TRUE(contains(script, "booster.no_sync(model, optimizer)"));
  EXPECT_TRUE(contains(script, "torch.autocast(device.type, dtype=torch.bfloat16)"));
  // Clipped as the DeepSpeed export and the engine clip: at the global norm 1.0.
  EXPECT_TRUE(contains(script, "MAX_GRAD_NORM = 1.0  #")) << script;
  EXPECT_TRUE(contains(script, "        optimizer.clip_grad_by_norm(MAX_GRAD_NORM)\n        optimizer.step()\n")) << script;
  EXPECT_TRUE(contains(script, "GRADIENT_ACCUMULATION_STEPS = " + std::to_string(r.training.num_micro_batches) + "\n"));
  EXPECT_TRUE(contains(script, "\"n_embd\": 768")) << "the model's config.json is embedded";
  EXPECT_TRUE(contains(script, "# Generated by Tessera"));
  expect_python_compiles(script, "ddp");
}

// fp16 wraps the TorchDDPModel in a TorchAMPModule: no_sync must get the DDP model
// (TorchDDPPlugin.no_sync asserts it), or the first micro-step fails.
TEST(Export, Fp16DdpWithAccumulationGivesNoSyncTheDdpModel) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) {
    r.plugins = {PluginKind::torch_ddp};
    r.precision = Precision::fp16;
    r.micro_batch_size = 2;
  });
  ASSERT_FALSE(planned.file.plans.empty());
  ASSERT_GT(planned.file.plans[0].training.num_micro_batches, 1);
  const std::string script = colossalai_script(planned, 0);
  EXPECT_TRUE(contains(script, "booster = Booster(plugin=plugin, mixed_precision=\"fp16\")")) << script;
  EXPECT_TRUE(contains(script, "with nullcontext() if last else booster.no_sync(model.module, optimizer):")) << script;
  expect_python_compiles(script, "ddp_fp16");
}

// The script runs on the accelerator ColossalAI picked, a CPU rank included: torch.cuda.synchronize()
// initialises CUDA and fails without a GPU, and ColossalAI's CpuAccelerator.synchronize raises
// (accelerator/cpu_accelerator.py, v0.5.0), so only a CUDA device is synchronised.
TEST(Export, ScriptTimesStepsOnTheDeviceItRunsOn) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_ddp}; });
  ASSERT_FALSE(planned.file.plans.empty());
  const std::string script = colossalai_script(planned, 0);
  EXPECT_FALSE(contains(script, "torch.cuda.synchronize()")) << script;
  EXPECT_TRUE(contains(script, "    if device.type == \"cuda\":\n        torch.cuda.synchronize(device)\n")) << script;
  EXPECT_TRUE(contains(script, "        synchronize(device)\n        start = time.perf_counter()\n")) << script;
  EXPECT_TRUE(contains(script, "        synchronize(device)\n        seconds = time.perf_counter() - start\n")) << script;
}

TEST(Export, ZeroStage2WithCpuOffload) {
  const Planned planned = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::low_level_zero};
    r.zero_stage = 2;
  });
  const size_t i = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.cpu_offload; });
  const EstimateRequest& r = planned.file.plans[i];
  ASSERT_EQ(r.plugin.effective_zero_stage(), 2);

  const json ds = deepspeed_config(planned, i);
  expect_deepspeed_batch(planned, i, ds);
  EXPECT_EQ(ds.at("zero_optimization").at("stage"), 2);
  EXPECT_EQ(ds["zero_optimization"].at("offload_optimizer").at("device"), "cpu");
  EXPECT_FALSE(ds["zero_optimization"].contains("offload_param"));
  EXPECT_EQ(ds["zero_optimization"].at("reduce_bucket_size").get<int64_t>(), r.plugin.reduce_bucket_numel);
  EXPECT_EQ(ds["zero_optimization"].at("allgather_bucket_size").get<int64_t>(), 500000000) << "the plan times one unbucketed all-gather";

  expect_perfetto_trace(planned, i);

  const std::string script = colossalai_script(planned, i);
  EXPECT_TRUE(contains(script, "    plugin = LowLevelZeroPlugin(\n        stage=2,\n        precision=\"bf16\",\n        cpu_offload=True,\n"
                               "        reduce_bucket_size_in_m=12,\n        max_norm=MAX_GRAD_NORM,\n    )\n"))
      << script;
  EXPECT_TRUE(contains(script, "HybridAdam(model.parameters()"));
  EXPECT_FALSE(contains(script, "no_sync")) << "ZeRO-2 has no no_sync";
  expect_python_compiles(script, "zero2");
}

TEST(Export, GeminiPlans) {
  const Planned planned = plan_for("gpt2-medium", [](PlanRequest& r) { r.plugins = {PluginKind::gemini}; });
  ASSERT_FALSE(planned.file.plans.empty());

  // "cpu": everything offloaded, which DeepSpeed's ZeRO-3 offload expresses.
  const size_t cpu = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.gemini.placement_policy == GeminiPlacement::cpu; });
  const json ds = deepspeed_config(planned, cpu);
  expect_deepspeed_batch(planned, cpu, ds);
  EXPECT_EQ(ds.at("zero_optimization").at("stage"), 3);
  EXPECT_EQ(ds["zero_optimization"].at("offload_optimizer").at("device"), "cpu");
  EXPECT_EQ(ds["zero_optimization"].at("offload_param").at("device"), "cpu");
  expect_perfetto_trace(planned, cpu);

  // A fraction strictly between 0 and 1 has no DeepSpeed equivalent.
  const size_t partial = find_plan(planned, [](const EstimateRequest& r) {
    return r.plugin.gemini.placement_policy == GeminiPlacement::static_placement && r.plugin.gemini.offload_optim_frac > 0 &&
           r.plugin.gemini.offload_optim_frac < 1;
  });
  auto refused = export_deepspeed(planned.file, partial);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::unsupported);
  EXPECT_TRUE(contains(refused.error().message, "--to deepspeed")) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "offload_optim_frac")) << refused.error().message;

  // ColossalAI takes the fractions as they are.
  const GeminiOptions& g = planned.file.plans[partial].plugin.gemini;
  const std::string script = colossalai_script(planned, partial);
  const std::string expected = "    plugin = GeminiPlugin(\n"
                               "        placement_policy=\"static\",\n"
                               "        shard_param_frac=1.0,\n"
                               "        offload_optim_frac=" + format_number(g.offload_optim_frac) + ",\n"
                               "        offload_param_frac=0.0,\n"
                               "        search_range_m=32,\n"
                               "        min_chunk_size_m=32,\n"
                               "        hidden_dim=" + std::to_string(g.search_interval) + ",\n"
                               "        precision=\"bf16\",\n";
  EXPECT_TRUE(contains(script, expected)) << script;
  EXPECT_TRUE(contains(script, "LazyInitContext"));
  EXPECT_TRUE(contains(script, "HybridAdam(model.parameters()"));
  expect_python_compiles(script, "gemini");

  // The old "cpu" policy is ColossalAI's static placement with both fractions 1.
  const std::string cpu_script = colossalai_script(planned, cpu);
  EXPECT_TRUE(contains(cpu_script, "shard_param_frac=1.0,\n        offload_optim_frac=1.0,\n        offload_param_frac=1.0,\n")) << cpu_script;
}

// The chunk size: left to ColossalAI's search when it reaches the plan's size,
// fixed with chunk_config_dict when the plan's size is the user's.
TEST(Export, GeminiChunkSizeIsSearchedOrFixed) {
  const Planned searched = plan_for("gpt2-medium", [](PlanRequest& r) { r.plugins = {PluginKind::gemini}; });
  ASSERT_FALSE(searched.file.plans.empty());
  const std::string script = colossalai_script(searched, 0);
  EXPECT_TRUE(contains(script, "# ColossalAI's chunk search settles on chunks of 51432448 elements")) << script;
  EXPECT_FALSE(contains(script, "chunk_config_dict")) << script;

  const Planned fixed = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::gemini};
    r.chunk_size = 40000000;
  });
  ASSERT_FALSE(fixed.file.plans.empty());
  const std::string fixed_script = colossalai_script(fixed, 0);
  EXPECT_TRUE(contains(fixed_script, "        chunk_config_dict={8: dict(chunk_size=40000000, keep_gathered=False)},\n")) << fixed_script;
  EXPECT_TRUE(contains(fixed_script, "        max_norm=MAX_GRAD_NORM,\n")) << fixed_script;  // GeminiPlugin clips itself
  EXPECT_TRUE(contains(fixed_script, "ColossalAI's own search would pick 51432448")) << fixed_script;
  EXPECT_FALSE(contains(fixed_script, "search_range_m")) << fixed_script;
  expect_python_compiles(fixed_script, "gemini_fixed");
}

// ColossalAI pins a host copy of every chunk by default (enable_async_reduce);
// a plan counted without them (tessera plan --pin-memory false) holds nothing
// on the host where nothing is offloaded, and its script turns pinning off.
TEST(Export, GeminiPinnedHostCopiesFollowThePlan) {
  const auto on_device = [](const EstimateRequest& r) { return r.plugin.gemini.placement_policy == GeminiPlacement::cuda; };
  const Planned pinned = plan_for("gpt2-medium", [](PlanRequest& r) { r.plugins = {PluginKind::gemini}; });
  const Planned unpinned = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::gemini};
    r.pin_memory = false;
  });
  ASSERT_FALSE(pinned.candidates.empty());
  ASSERT_FALSE(unpinned.candidates.empty());
  EXPECT_EQ(pinned.file.document["plans"][0]["settings"]["pin_memory"], true);
  EXPECT_EQ(unpinned.file.document["plans"][0]["settings"]["pin_memory"], false);
  EXPECT_GT(pinned.candidates[find_plan(pinned, on_device)].memory.ranks.at(0).host_total, 0);
  EXPECT_EQ(unpinned.candidates[find_plan(unpinned, on_device)].memory.ranks.at(0).host_total, 0);

  const std::string pinned_script = colossalai_script(pinned, 0);
  EXPECT_FALSE(contains(pinned_script, "        enable_async_reduce=")) << pinned_script;  // no argument: the default
  EXPECT_TRUE(contains(pinned_script, "# Its default enable_async_reduce=True pins a host copy of every chunk")) << pinned_script;
  const std::string unpinned_script = colossalai_script(unpinned, 0);
  EXPECT_TRUE(contains(unpinned_script, "        enable_async_reduce=False,\n")) << unpinned_script;
  expect_python_compiles(unpinned_script, "gemini_unpinned");
}

// A full-recompute plan: the ColossalAI script checkpoints every block; a DeepSpeed
// config cannot turn that on for a Hugging Face model, so the export refuses.
TEST(Export, FullRecomputeIsRefusedByDeepSpeedAndScriptedForColossalAi) {
  const Planned planned = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::low_level_zero};
    r.recompute = {RecomputeMode::full};
  });
  ASSERT_FALSE(planned.file.plans.empty());
  ASSERT_EQ(planned.file.plans[0].training.recompute, RecomputeMode::full);
  auto refused = export_deepspeed(planned.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "--to deepspeed: the plan recomputes every block (recompute full)")) << refused.error().message;
  EXPECT_EQ(refused.error().message.find('\n'), std::string::npos);
  const std::string script = colossalai_script(planned, 0);
  EXPECT_TRUE(contains(script, "    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={\"use_reentrant\": False})\n")) << script;
}

// GPT-2's config trains with dropout 0.1. The flash profile counts its masks, so
// the exports keep it; the hf profile (measured at dropout 0) counts none, so the
// script trains without dropout and DeepSpeed, which cannot change the model, refuses.
TEST(Export, Gpt2DropoutFollowsWhatThePlanCounts) {
  const auto planned_with = [](ActivationProfile profile) {
    return plan_for("gpt2", [profile](PlanRequest& r) {
      r.plugins = {PluginKind::low_level_zero};
      r.recompute = {RecomputeMode::none};
      r.activation_profile = profile;
    });
  };
  const Planned flash = planned_with(ActivationProfile::flash);
  ASSERT_FALSE(flash.file.plans.empty());
  const std::string kept = colossalai_script(flash, 0);
  EXPECT_FALSE(contains(kept, "config.resid_pdrop = 0.0")) << kept;
  EXPECT_TRUE(contains(kept, "\"resid_pdrop\": 0.1")) << kept;
  expect_deepspeed_batch(flash, 0, deepspeed_config(flash, 0));

  const Planned hf = planned_with(ActivationProfile::hf);
  ASSERT_FALSE(hf.file.plans.empty());
  const std::string zeroed = colossalai_script(hf, 0);
  EXPECT_TRUE(contains(zeroed, "    # The plan's activation profile (hf) counts no dropout masks: train without dropout,\n"
                               "    # as planned (the config has attn_pdrop 0.1, resid_pdrop 0.1, embd_pdrop 0.1).\n"
                               "    config.attn_pdrop = 0.0\n    config.resid_pdrop = 0.0\n    config.embd_pdrop = 0.0\n"))
      << zeroed;
  expect_python_compiles(zeroed, "gpt2_hf_dropout");
  auto refused = export_deepspeed(hf.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "counts no dropout, and the model's config.json trains with attn_pdrop 0.1, resid_pdrop 0.1, "
                                                "embd_pdrop 0.1, which a DeepSpeed config cannot turn off"))
      << refused.error().message;
}

TEST(Export, HybridTensorAndPipelinePlan) {
  const Planned planned = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::hybrid_parallel};
    r.tp = 2;
    r.pp = 2;
  });
  ASSERT_FALSE(planned.file.plans.empty());
  const EstimateRequest& r = planned.file.plans[0];
  ASSERT_EQ(r.layout.tp, 2);
  ASSERT_EQ(r.layout.pp, 2);

  auto refused = export_deepspeed(planned.file, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "tensor parallelism")) << refused.error().message;

  expect_perfetto_trace(planned, 0);

  const std::string script = colossalai_script(planned, 0);
  const std::string expected = "    plugin = HybridParallelPlugin(\n"
                               "        tp_size=2,\n"
                               "        pp_size=2,\n"
                               "        zero_stage=" + std::to_string(r.plugin.effective_zero_stage()) + ",\n"
                               "        dp_outside=False,\n"
                               "        num_microbatches=" + std::to_string(r.training.num_micro_batches) + ",\n"
                               "        microbatch_size=" + std::to_string(r.training.micro_batch_size) + ",\n"
                               "        pp_style=\"" + std::string(enum_name(r.plugin.pp_schedule)) + "\",\n" +
                               (r.plugin.pp_schedule == PipelineSchedule::interleaved
                                    ? "        num_model_chunks=" + std::to_string(r.plugin.num_model_chunks) + ",\n"
                                    : std::string()) +
                               (r.layout.sequence_parallel ? "        enable_sequence_parallelism=True,\n"
                                                             "        sequence_parallelism_mode=\"split_gather\",\n"
                                                           : "        enable_sequence_parallelism=False,\n");
  EXPECT_TRUE(contains(script, expected)) << script;
  EXPECT_TRUE(contains(script, "booster.execute_pipeline("));
  EXPECT_TRUE(contains(script, "GRADIENT_ACCUMULATION_STEPS = 1  # the pipeline runs the micro-batches"));
  expect_python_compiles(script, "hybrid");

  // Schedules ColossalAI cannot run are refused before a script is written:
  // GPipe (it has none), and a hand-edited interleaved plan with one chunk.
  const auto expect_refused = [&](PipelineSchedule schedule, int64_t chunks, const std::string& message) {
    PlanFile edited = planned.file;
    edited.plans[0].plugin.pp_schedule = schedule;
    edited.plans[0].plugin.num_model_chunks = chunks;
    auto refused = export_colossalai(edited, 0);
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(contains(refused.error().message, message)) << refused.error().message;
  };
  expect_refused(PipelineSchedule::gpipe, 1, "gpipe");
  expect_refused(PipelineSchedule::interleaved, 1, "--plan 1: --pp-schedule interleaved needs --model-chunks 2");
}

// hybrid_parallel's ZeRO with --cpu-offload: the plan's settings carry it
// (through its JSON, as a plan file does) into HybridParallelPlugin's
// cpu_offload, which ColossalAI hands to its ZeRO optimizer.
TEST(Export, HybridZeroWithCpuOffload) {
  Planned planned = plan_for("gpt2-medium", [](PlanRequest& r) {
    r.plugins = {PluginKind::hybrid_parallel};
    r.tp = 2;
    r.pp = 1;
  });
  ASSERT_FALSE(planned.file.plans.empty());
  EstimateRequest offloaded = planned.file.plans[0];
  offloaded.plugin.zero_stage = 1;
  offloaded.plugin.cpu_offload = true;
  auto read_back = request_from_json(request_to_json(offloaded), "plan.json");
  ASSERT_TRUE(read_back.ok()) << read_back.error().message;
  EXPECT_TRUE(read_back->plugin.cpu_offload);
  planned.file.plans[0] = read_back.value();
  const std::string script = colossalai_script(planned, 0);
  EXPECT_TRUE(contains(script, "        zero_stage=1,\n")) << script;
  EXPECT_TRUE(contains(script, "        cpu_offload=True,\n")) << script;
  expect_python_compiles(script, "hybrid_offload");
}

// torch_fsdp with --cpu-offload, as the search offers it (one micro-batch: FSDP1
// accumulates nothing under offload): TorchFSDPPlugin gets
// cpu_offload=CPUOffload(offload_params=True), read back from the plan's JSON;
// DeepSpeed offloads parameters and optimizer at stage 3 (full_shard) and
// cannot at stage 2 (shard_grad_op).
TEST(Export, FsdpWithCpuOffload) {
  Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_fsdp}; });
  const size_t i = find_plan(planned, [](const EstimateRequest& r) { return r.plugin.cpu_offload && r.plugin.fsdp_strategy == FsdpStrategy::full_shard; });
  ASSERT_LT(i, planned.file.plans.size());
  EXPECT_EQ(planned.file.plans[i].training.num_micro_batches, 1);
  const std::string script = colossalai_script(planned, i);
  EXPECT_TRUE(contains(script, "from torch.distributed.fsdp import CPUOffload, MixedPrecision, ShardingStrategy\n")) << script;
  EXPECT_TRUE(contains(script, "        cpu_offload=CPUOffload(offload_params=True),\n")) << script;
  expect_python_compiles(script, "fsdp_offload");
  const json ds = deepspeed_config(planned, i);
  EXPECT_EQ(ds.at("zero_optimization").at("stage").get<int>(), 3);
  EXPECT_EQ(ds.at("zero_optimization").at("offload_param").at("device").get<std::string>(), "cpu");
  EXPECT_EQ(ds.at("zero_optimization").at("offload_optimizer").at("device").get<std::string>(), "cpu");
  planned.file.plans[i].plugin.fsdp_strategy = FsdpStrategy::shard_grad_op;
  auto refused = export_deepspeed(planned.file, i);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.error().message, "DeepSpeed offloads parameters only at ZeRO stage 3")) << refused.error().message;
}

TEST(Export, PlanIndexOutOfRangeNamesPlan) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_ddp}; });
  const size_t past = planned.file.plans.size();
  for (ExportTarget target : {ExportTarget::colossalai, ExportTarget::deepspeed, ExportTarget::perfetto}) {
    auto text = export_plan(planned.file, past, target);
    ASSERT_FALSE(text.ok());
    EXPECT_TRUE(contains(text.error().message, "--plan " + std::to_string(past + 1))) << text.error().message;
  }
}

// A plan edited by hand must still be the run its file describes: every target
// used to write a DeepSpeed train_batch_size or a launch that disagreed with it.
TEST(Export, HandEditedPlanMustMatchItsFile) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_ddp}; });
  const std::string redo = "; undo the edit or re-run `tessera plan`";
  const std::vector<std::pair<std::function<void(PlanFile&)>, std::string>> edits = {
      {[](PlanFile& f) { f.plans[0].layout.dp = 4; }, "--plan 1: layout dp 4 × tp 1 × pp 1 = 4 GPUs, but the file's cluster has 8" + redo},
      {[](PlanFile& f) { f.cluster.num_nodes = 2; }, "--plan 1: layout dp 8 × tp 1 × pp 1 = 8 GPUs, but the file's cluster has 16" + redo},
      {[](PlanFile& f) { f.global_batch_size = 100; }, "sequences per step, but the file's global_batch_size is 100" + redo},
      {[](PlanFile& f) { f.plans[0].training.num_micro_batches += 1; }, "sequences per step, but the file's global_batch_size is 64" + redo},
      {[](PlanFile& f) { f.seq_len = 512; }, "--plan 1: training.seq_len 1024 differs from the file's seq_len 512" + redo},
  };
  for (const auto& [edit, message] : edits) {
    PlanFile file = planned.file;
    edit(file);
    for (ExportTarget target : {ExportTarget::colossalai, ExportTarget::deepspeed, ExportTarget::perfetto}) {
      auto text = export_plan(file, 0, target);
      ASSERT_FALSE(text.ok()) << message;
      EXPECT_TRUE(text.error().message.ends_with(message)) << text.error().message;
    }
  }
}

// A ZeRO-3 plan counted as DeepSpeed runs it (--runtime deepspeed) with the
// optimizer and the parameters offloaded: the config carries both offloads,
// pin_memory and the sub-group size the host buffers were counted with.
TEST(Export, DeepSpeedOffloadCarriesThePlansPinningAndSubGroups) {
  Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::low_level_zero}; });
  json document = planned.file.document;
  json& plan = document["plans"][0];
  plan["runtime"] = "deepspeed";
  plan["settings"] = {{"stage", 3}, {"cpu_offload", true}, {"pin_memory", false}, {"sub_group_size", 12345678}, {"offload_param", true}};
  auto file = parse_plan_file(document.dump(), "plan.json");
  ASSERT_TRUE(file.ok()) << file.error().message;
  planned.file = std::move(file).value();
  const json zero = deepspeed_config(planned, 0)["zero_optimization"];
  EXPECT_EQ(zero["stage"], 3);
  EXPECT_EQ(zero["offload_optimizer"], json({{"device", "cpu"}, {"pin_memory", false}}));
  EXPECT_EQ(zero["offload_param"], json({{"device", "cpu"}, {"pin_memory", false}}));
  EXPECT_EQ(zero["sub_group_size"], 12345678);
}

// A huge float in a MiB setting is refused before it is converted to bytes (undefined behaviour in int64).
TEST(Export, HugeBucketSizeIsRefused) {
  const Planned planned = plan_for("gpt2", [](PlanRequest& r) { r.plugins = {PluginKind::torch_ddp}; });
  json document = planned.file.document;
  document["plans"][0]["settings"]["bucket_cap_mb"] = 1e300;
  auto file = parse_plan_file(document.dump(), "plan.json");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().message, "plan.json plans[0].settings: key 'bucket_cap_mb' must lie in [0, 1e9], got 1e+300");
}

}  // namespace
}  // namespace tessera::planner
