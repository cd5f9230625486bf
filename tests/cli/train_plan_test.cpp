// `tessera train --plan p.json` on the CPU engine and with --gpu: the plan is
// read once (settle_train_options, apply_plan) for both, the activation
// profile alone becoming the engine's own; what the GPU step does not run is
// refused as the plan's setting, before any device is looked for; what it
// runs gets as far as the device (here: none).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/scratch_dir.h"
#include "cli_run.h"
#include "tessera/engine/device/gpu_presence.h"
#include "tessera/planner/plan_file.h"
#include "train_command.h"

namespace tessera::cli {
namespace {

using planner::ActivationProfile;
using testing::CliRun;
using testing::run;

// `tessera plan` for GPT-2 on H100s with `options` added; the file's path.
std::string make_plan(const tessera::testing::ScratchDir& scratch, const std::string& name, const std::vector<const char*>& options) {
  const std::string path = scratch.path(name);
  std::vector<const char*> args{"plan", "--model", "gpt2", "--gpu", "h100-80g", "--seq", "1024", "--output", path.c_str()};
  args.insert(args.end(), options.begin(), options.end());
  const CliRun planned = run(args);
  EXPECT_EQ(planned.code, 0) << planned.err;
  return path;
}

// The plan at `path` with its best row's fields at `edits` (JSON pointers)
// set: settings that `tessera plan` does not search but a plan file can hold.
std::string edited_plan(const std::string& path, const std::vector<std::pair<std::string, nlohmann::json>>& edits, const std::string& edited) {
  std::ifstream in(path);
  nlohmann::json plan = nlohmann::json::parse(in);
  for (const auto& [pointer, value] : edits) plan["plans"][0][nlohmann::json::json_pointer(pointer)] = value;
  std::ofstream(edited) << plan.dump(2);
  return edited;
}

bool no_device(const std::string& err) {
  return err.find("no CUDA device is available") != std::string::npos || err.find("built without CUDA (TESSERA_CUDA=OFF)") != std::string::npos;
}

// The plan → GPU options path: on the GPU the plan's micro-batch, micro-batches,
// sequence, recompute, precision, optimizer, layout and plugin are the CPU
// engine's, both the plan's; only the activation profile differs, each the engine's own.
TEST(TrainPlan, TheGpuStepTakesThePlansSettingsAsTheCpuEngineDoes) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = make_plan(scratch, "p.json", {"--gpus", "2", "--global-batch", "32", "--plugin", "low_level_zero", "--zero-stage", "1",
                                                          "--recompute", "selective", "--micro-batch", "4"});
  auto file = planner::read_plan_file(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const planner::EstimateRequest& best = file->plans.front();
  ASSERT_EQ(best.training.activation_profile, ActivationProfile::flash);
  for (const bool on_gpu : {false, true}) {
    TrainCliOptions o;
    o.plan = path;
    o.out = scratch.path("run");
    o.estimate.gpu = on_gpu ? "h100-80g" : "cpu";
    auto settled = settle_train_options(o, 2);
    ASSERT_TRUE(settled.ok()) << settled.error().message;
    ASSERT_TRUE(settled->has_value());
    const TrainedPlan& plan = settled->value();
    EXPECT_EQ(plan.profile, ActivationProfile::flash);
    EXPECT_EQ(plan.gpu, "h100-80g");
    const planner::EstimateRequest& r = o.estimate.request;
    EXPECT_EQ(r.training.activation_profile, on_gpu ? ActivationProfile::tessera_gpu : ActivationProfile::tessera);
    EXPECT_EQ(o.estimate.model, "gpt2");
    EXPECT_EQ(r.layout.dp, 2);
    EXPECT_EQ(r.plugin.kind, planner::PluginKind::low_level_zero);
    EXPECT_EQ(r.plugin.effective_zero_stage(), 1);
    auto t = engine_options(o);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(t->micro_batch_size, 4);
    EXPECT_EQ(t->num_micro_batches, 4);  // 32 sequences over 2 ranks of 4
    EXPECT_EQ(t->seq_len, 1024);
    EXPECT_EQ(t->recompute, planner::RecomputeMode::selective);
    EXPECT_EQ(t->precision, best.training.precision);
    EXPECT_EQ(t->optimizer.kind, best.training.optimizer);
    EXPECT_EQ(t->plugin.kind, planner::PluginKind::low_level_zero);
  }
}

// Plans of one GPU the step runs get through every check to the device;
// nothing is written before it.
TEST(TrainPlan, ARunnablePlanGetsAsFarAsTheDevice) {
  if (tessera::engine::cuda_device_presence().available) GTEST_SKIP() << "a CUDA device is here: the run would train";
  const tessera::testing::ScratchDir scratch;
  for (const std::vector<const char*>& options : std::vector<std::vector<const char*>>{
           {"--gpus", "1", "--global-batch", "16"}, {"--gpus", "1", "--global-batch", "16", "--recompute", "full"},
           {"--gpus", "1", "--global-batch", "16", "--plugin", "gemini"}}) {
    const std::string plan = make_plan(scratch, "p.json", options);
    const std::string out = scratch.path("run");
    const CliRun r = run({"train", "--plan", plan.c_str(), "--gpu", "h100-80g", "--steps", "1", "--out", out.c_str()});
    EXPECT_EQ(r.code, 2) << options.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(no_device(r.err)) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << options.back();
  }
}

// What the GPU step does not run, refused as the plan's setting in one line
// (the GPU step's own checks: check_engine_supports, check_gpu_plugin,
// check_gpu_layout, the precision and the optimizer), before the device.
TEST(TrainPlan, WhatTheGpuStepDoesNotRunIsRefusedAsThePlansSetting) {
  const tessera::testing::ScratchDir scratch;
  const std::string one_gpu = make_plan(scratch, "one.json", {"--gpus", "1", "--global-batch", "16"});
  struct Refusal {
    std::string plan;
    std::string message;
  };
  const std::string fix = " (a setting of the plan: make it again with tessera plan)\n";
  for (const Refusal& refusal : std::vector<Refusal>{
           {make_plan(scratch, "fp32.json", {"--gpus", "1", "--global-batch", "16", "--precision", "fp32"}),
            ": --precision fp32: the GPU training step runs bf16 mixed precision; use --precision bf16"},
           {make_plan(scratch, "sgd.json", {"--gpus", "1", "--global-batch", "16", "--optimizer", "sgd"}),
            ": --optimizer sgd: the GPU training step uses AdamW only; use --optimizer adamw"},
           {edited_plan(one_gpu, {{"/training/recompute", "op_selective"}}, scratch.path("op.json")),
            ": --recompute op_selective is torchtitan's policy, for estimates of its runs; the engine recomputes none, selective or full"},
           {edited_plan(one_gpu, {{"/runtime", "megatron"}}, scratch.path("megatron.json")),
            ": --runtime megatron: the engine keeps ColossalAI's model states; use --runtime colossalai"}}) {
    const CliRun r = run({"train", "--plan", refusal.plan.c_str(), "--gpu", "h100-80g", "--steps", "1", "--out", scratch.path("never").c_str()});
    EXPECT_EQ(r.code, 2) << refusal.message;
    EXPECT_EQ(r.err, "tessera: error: --plan " + refusal.plan + refusal.message + fix);
  }
}

// --device-memory on a GPU: the planner's estimate of the run (what
// DIR/plan.json holds) against it before the device, in the CPU engine's words.
TEST(TrainPlan, DeviceMemoryHoldsAGpuRunToTheEstimateBeforeTheDevice) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = make_plan(scratch, "p.json", {"--gpus", "1", "--global-batch", "16"});
  const CliRun small = run({"train", "--plan", plan.c_str(), "--gpu", "h100-80g", "--device-memory", "4096", "--out", scratch.path("never").c_str()});
  EXPECT_EQ(small.code, 2);
  EXPECT_EQ(small.err.rfind("tessera: error: --device-memory 4.00 GiB: the plan needs ", 0), 0u) << small.err;
  EXPECT_EQ(std::count(small.err.begin(), small.err.end(), '\n'), 1) << small.err;
  if (tessera::engine::cuda_device_presence().available) return;
  const CliRun enough = run({"train", "--plan", plan.c_str(), "--gpu", "h100-80g", "--device-memory", "40960", "--out", scratch.path("never").c_str()});
  EXPECT_EQ(enough.code, 2);
  EXPECT_TRUE(no_device(enough.err)) << enough.err;
}

// A plan made for one GPU trained with another --gpu: one warning line, and the run goes on.
TEST(TrainPlan, AnotherGpuThanThePlansIsWarnedAbout) {
  if (tessera::engine::cuda_device_presence().available) GTEST_SKIP() << "a CUDA device is here: the run would train";
  const tessera::testing::ScratchDir scratch;
  const std::string plan = make_plan(scratch, "p.json", {"--gpus", "1", "--global-batch", "16", "--micro-batch", "2"});
  const CliRun r = run({"train", "--plan", plan.c_str(), "--gpu", "h200-141g", "--out", scratch.path("never").c_str()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  EXPECT_EQ(r.err.rfind("tessera: warning: --plan " + plan + " was made for h100-80g and trains on h200-141g: the run's plan.json estimates it on "
                        "h200-141g (--device-memory 81559 holds it to h100-80g's memory)\n", 0), 0u) << r.err;
  EXPECT_TRUE(no_device(r.err)) << r.err;
}

}  // namespace
}  // namespace tessera::cli
