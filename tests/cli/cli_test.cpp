// The `tessera` command driven in-process: what a user sees on stdout and stderr.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iterator>
#include <fstream>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "../support/scratch_dir.h"
#include "cli_app.h"
#include "cli_run.h"
#include "commands.h"
#include "estimate_options.h"
#include "tessera/engine/device/gpu_presence.h"

namespace tessera::cli {
namespace {

using testing::CliRun;
using testing::run;

TEST(Cli, ModelsListsEveryShippedModelWithItsCount) {
  const CliRun r = run({"models"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"gpt2-medium", "354,823,168", "llama-2-70b", "68,976,648,192", "bloom-176b", "zero-7.5b"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
  }
  const auto doc = nlohmann::json::parse(run({"models", "--format", "json"}).out);
  EXPECT_GE(doc["models"].size(), 14u);
}

TEST(Cli, GpusProfilePrintsAFileThatPlansAsTheShippedGpu) {
  const CliRun shown = run({"gpus", "--profile", "h100-80g"});
  ASSERT_EQ(shown.code, 0) << shown.err;
  const auto profile = nlohmann::json::parse(shown.out);
  EXPECT_EQ(profile["memory_bytes"], 85520809984LL);
  EXPECT_EQ(profile["peak_tflops"]["bf16"], 989.4);
  EXPECT_EQ(profile["peak_tflops"]["fp8"], 1978.9);

  tessera::testing::ScratchDir dir;
  const std::string file = dir.path() + "/edited.json";
  std::ofstream(file) << shown.out;
  const std::vector<const char*> estimate = {"estimate", "--model", "gpt2-medium", "--plugin", "torch_ddp", "--dp", "2",
                                             "--micro-batch", "2", "--seq", "512", "--format", "json", "--gpu"};
  auto with = [&](const char* gpu) {
    std::vector<const char*> args = estimate;
    args.push_back(gpu);
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["ranks"][0]["total"];
  };
  EXPECT_EQ(with(file.c_str()), with("h100-80g"));

  const CliRun unknown = run({"gpus", "--profile", "h101"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("--profile: 'h101' is not a known GPU"), std::string::npos) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1);
  EXPECT_EQ(run({"gpus", "--profile", "cpu"}).code, 0);
}

TEST(Cli, EstimateJsonIsOneObjectWithTheAcceptanceKeys) {
  const CliRun r = run({"estimate", "--model", "gpt2-medium", "--format", "json", "--dp", "8", "--plugin", "gemini"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty());
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["model"]["parameter_count"], 354'823'168);
  const auto& rank = doc["ranks"].at(0);
  EXPECT_TRUE(rank["categories"]["chunk_buffers"].contains("device_bytes"));
  EXPECT_TRUE(rank["categories"]["optimizer_states"].contains("host_bytes"));
  EXPECT_TRUE(rank["total"].contains("device_bytes"));
  EXPECT_TRUE(rank.contains("gpu_capacity_bytes"));
  EXPECT_GT(doc["gemini"]["chunk_size"].get<int64_t>(), 0);
}

// Issue 11's acceptance: a GPU estimate counts a fused attention kernel's
// saved tensors by default (no s² term), so doubling the sequence doubles the
// activations and the logits exactly, and every report names the profile.
TEST(Cli, GpuEstimatesDefaultToTheFlashProfile) {
  int64_t activations[2] = {}, logits[2] = {};
  const char* seqs[2] = {"8192", "16384"};
  for (int i = 0; i < 2; ++i) {
    const CliRun r = run({"estimate", "--model", "llama-3-8b", "--plugin", "torch_fsdp", "--dp", "8", "--micro-batch", "1", "--seq", seqs[i], "--gpu",
                          "h100-80g", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["training"]["activation_profile"], "flash");
    activations[i] = doc["ranks"][0]["categories"]["activations"]["device_bytes"].get<int64_t>();
    logits[i] = doc["ranks"][0]["categories"]["logits"]["device_bytes"].get<int64_t>();
  }
  // 32 layers × 8192 tokens × 2 bytes × (norm inputs 2h, QKV input h, Q and K h + kv, V kv,
  // projection input h, MLP input h, SwiGLU 2I and its output I) + 4 bytes × 32 heads (log-sum-exp).
  const int64_t h = 4096, kv = 1024, I = 14336;
  EXPECT_EQ(activations[0], 32 * 8192 * (2 * (6 * h + 2 * kv + 3 * I) + 4 * 32) + 8192 * 2 * 2 * h);  // + final norm and head inputs
  EXPECT_EQ(activations[1], 2 * activations[0]);
  EXPECT_EQ(logits[1], 2 * logits[0]);
  for (const char* format : {"table", "html"}) {
    const CliRun r = run({"estimate", "--model", "llama-3-8b", "--plugin", "torch_fsdp", "--dp", "8", "--format", format});
    EXPECT_NE(r.out.find("activation profile"), std::string::npos) << format;
    EXPECT_NE(r.out.find("flash"), std::string::npos) << format;
  }
  const CliRun megatron = run({"estimate", "--model", "llama-3-8b", "--activation-profile", "megatron", "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(megatron.out)["training"]["activation_profile"], "megatron");
}

// --transformers-version: the hf profiles' release, named in the text report,
// the JSON's training block and the plan's header; an older release's fp32
// logits and attention mask in the numbers.
TEST(Cli, TransformersVersionIsNamedWhereAnHfProfileRuns) {
  const std::vector<const char*> estimate = {"estimate", "--model", "llama-2-7b", "--activation-profile", "hf", "--recompute", "full", "--seq", "4096"};
  auto json_of = [&](std::vector<const char*> extra) {
    std::vector<const char*> args = estimate;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--format", "json"});
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto today = json_of({}), then = json_of({"--transformers-version", "4.32.1"});
  EXPECT_EQ(today["training"]["transformers_version"], "5.17");
  EXPECT_EQ(then["training"]["transformers_version"], "4.32");
  const auto logits = [](const nlohmann::json& doc) { return doc["ranks"][0]["categories"]["logits"]["device_bytes"].get<int64_t>(); };
  EXPECT_EQ(logits(then) - logits(today), int64_t{4096} * 32000 * 2);  // fp32 logits held, not bf16
  std::vector<const char*> table = estimate;
  table.insert(table.end(), {"--transformers-version", "4.32"});
  const CliRun text = run(table);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("transformers"), std::string::npos);
  EXPECT_NE(text.out.find("4.32"), std::string::npos);
  const CliRun flash = run({"estimate", "--model", "llama-2-7b", "--format", "json"});
  EXPECT_FALSE(nlohmann::json::parse(flash.out)["training"].contains("transformers_version"));
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  const CliRun planned = run({"plan", "--model", "llama-2-7b", "--gpus", "8", "--global-batch", "64", "--activation-profile", "hf",
                              "--transformers-version", "4.33", "--top", "1", "--output", plan.c_str()});
  ASSERT_EQ(planned.code, 0) << planned.err;
  EXPECT_NE(planned.out.find("activation profile hf (transformers 4.33)"), std::string::npos) << planned.out;
  std::ifstream in(plan);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_FALSE(doc["plans"].empty());
  EXPECT_EQ(doc["plans"][0]["training"]["transformers_version"], "4.33");
}

// `plan --format json` prints the plan document and writes a file only where
// --output names one; a file there that is not a plan document is left alone.
TEST(Cli, PlanWritesItsDocumentOnlyWhereAskedAndReplacesOnlyPlans) {
  const tessera::testing::ScratchDir scratch;
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(scratch.path());
  const std::vector<const char*> plan = {"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--top", "1"};
  auto with = [&](std::vector<const char*> extra) {
    std::vector<const char*> args = plan;
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const CliRun printed = with({"--format", "json"});
  EXPECT_EQ(printed.code, 0) << printed.err;
  EXPECT_EQ(nlohmann::json::parse(printed.out)["kind"], "plan");
  EXPECT_FALSE(std::filesystem::exists("plan.json"));
  const CliRun written = with({"--format", "json", "--output", "given.json"});
  EXPECT_EQ(written.code, 0) << written.err;
  EXPECT_EQ(written.err, "wrote given.json\n");
  EXPECT_TRUE(std::filesystem::exists("given.json"));
  EXPECT_EQ(with({"--output", "given.json"}).code, 0);  // a plan document is replaced
  { std::ofstream("mine.json") << "{\"mine\": 1}\n"; }
  const CliRun refused = with({"--output", "mine.json"});
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.err, "tessera: error: --output mine.json: the file there is not a plan document of tessera plan, so it is left as it is; "
                         "name another --output or move that file\n");
  std::ifstream mine("mine.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(mine), {}), "{\"mine\": 1}\n");
  std::filesystem::current_path(before);
}

// A shown plan that no export of its runtime writes says so under the table,
// with the export's refusal, rather than first when it is exported.
TEST(Cli, PlanSaysWhichPlansExportNowhere) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  const CliRun qwen = run({"plan", "--model", "qwen2-7b", "--gpus", "16", "--global-batch", "64", "--runtime", "torchtitan", "--top", "2",
                           "--output", plan.c_str()});
  ASSERT_EQ(qwen.code, 0) << qwen.err;
  EXPECT_NE(qwen.out.find("\n  plans 1, 2 export nowhere yet: --to torchtitan: qwen2-7b has biases on its linear layers, which torchtitan's llama3 "
                          "model does not build; plan again with --runtime colossalai and export that --to colossalai\n"),
            std::string::npos)
      << qwen.out;
  const CliRun gpt2 = run({"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--output", plan.c_str()});
  ASSERT_EQ(gpt2.code, 0) << gpt2.err;
  EXPECT_EQ(gpt2.out.find("nowhere"), std::string::npos) << gpt2.out;
}

// FP8 plans say their throughput is an upper bound and their MFU is of the bf16 peak.
TEST(Cli, Fp8PlansSayHowToReadTheirThroughput) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  const CliRun fp8 = run({"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--precision", "fp8", "--runtime", "megatron", "--top", "1",
                          "--output", plan.c_str()});
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_NE(fp8.out.find("\nNote: FP8 steps are predicted faster than every published FP8 run they were checked against (README, Validation); "
                         "read FP8 tokens/s as an upper bound\n"),
            std::string::npos)
      << fp8.out;
  EXPECT_NE(fp8.out.find("MFU (of the bf16 peak)"), std::string::npos);
  const CliRun bf16 = run({"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--runtime", "megatron", "--top", "1", "--output", plan.c_str()});
  EXPECT_EQ(bf16.out.find("Note: FP8"), std::string::npos);
}

// --memory-headroom: what every GPU must leave free, in GiB or percent; the
// estimate's margin and verdict count it, and the search keeps plans under it.
TEST(Cli, MemoryHeadroomIsLeftFreeByEstimatesAndPlans) {
  const std::vector<const char*> estimate = {"estimate", "--model", "llama-3-8b", "--plugin", "torch_fsdp", "--dp", "8", "--seq", "8192", "--format", "json"};
  auto with = [&](const char* headroom) {
    std::vector<const char*> args = estimate;
    args.insert(args.end(), {"--memory-headroom", headroom});
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto none = with("0"), ten = with("10"), tenth = with("10%"), twenty = with("20");
  const int64_t capacity = none["ranks"][0]["gpu_capacity_bytes"].get<int64_t>();
  const int64_t margin = none["ranks"][0]["margin_bytes"].get<int64_t>();
  EXPECT_EQ(ten["ranks"][0]["margin_bytes"].get<int64_t>(), margin - (int64_t{10} << 30));
  EXPECT_EQ(tenth["ranks"][0]["margin_bytes"].get<int64_t>(), margin - static_cast<int64_t>(0.1 * static_cast<double>(capacity)));
  EXPECT_TRUE(ten["fits"].get<bool>());
  EXPECT_FALSE(twenty["fits"].get<bool>()) << "61.73 GiB of 79.65 GiB leaves less than 20 GiB";
  EXPECT_EQ(twenty["assumptions"]["memory_headroom_bytes"], int64_t{20} << 30);
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  const CliRun planned = run({"plan", "--model", "llama-2-70b", "--gpus", "64", "--gpu", "h100-80g", "--global-batch", "512", "--seq", "4096",
                              "--memory-headroom", "10", "--top", "100", "--output", plan.c_str()});
  ASSERT_EQ(planned.code, 0) << planned.err;
  EXPECT_NE(planned.out.find("10.00 GiB left free per GPU"), std::string::npos);
  std::ifstream in(plan);
  const auto doc = nlohmann::json::parse(in);
  ASSERT_FALSE(doc["plans"].empty());
  for (const auto& p : doc["plans"]) EXPECT_LE(p["peak_device_bytes"].get<int64_t>(), capacity - (int64_t{10} << 30)) << p["description"];
  for (const char* bad : {"abc", "-1", "100%", "1e3", "2GiB"}) {
    const CliRun r = run({"estimate", "--model", "gpt2", "--memory-headroom", bad});
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(r.err.rfind("tessera: error: --memory-headroom: '", 0), 0u) << r.err;
  }
}

TEST(Cli, BadInputIsOneLineAndExitCodeTwo) {
  for (const auto& args : std::vector<std::vector<const char*>>{
           {"estimate", "--model", "gpt2", "--plugin", "hybrid_parallel", "--tp", "5"},
           {"estimate", "--model", "gpt2", "--gpu", "tpu-v9"},
           {"estimate", "--model", "no-such-model"},
           {"estimate", "--model", "gpt2", "--dp", "abc"},
           {"estimate", "--model", "gpt2", "--precision", "fp4"},
           {"estimate"},
           {"frobnicate"}}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args.back();
    EXPECT_TRUE(r.out.empty()) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("tessera: error: ", 0), 0u) << r.err;
  }
}

TEST(Cli, AnUnknownOptionIsNamedWithWhatWasMeant) {
  struct Case {
    std::vector<const char*> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      // A near spelling of the command's own option.
      {{"estimate", "--model", "gpt2", "--dpp", "8"}, "unknown option --dpp for `tessera estimate`; did you mean --dp? (see tessera estimate --help)"},
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--micro-batchs=2"}, "unknown option --micro-batchs for `tessera plan`; did you mean --micro-batch?"},
      // Another command's option.
      {{"estimate", "--model", "gpt2", "--global-batch", "64"}, "unknown option --global-batch for `tessera estimate`; it is an option of `tessera plan`, not of `tessera estimate`"},
      // Nothing like it anywhere.
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--frobnicate"}, "unknown option --frobnicate for `tessera plan` (see tessera plan --help)"},
      // A value that is no number is not given a range; one beyond the range is.
      {{"estimate", "--model", "gpt2", "--seq", "1e3"}, "--seq: '1e3' is not a whole number (see tessera estimate --help)"},
  };
  for (const Case& c : cases) {
    const CliRun r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.says;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

// --recompute-num-layers: the estimate's title names the count, the plan's
// every row; without --recompute full both refuse in one line, exit 2.
TEST(Cli, RecomputeNumLayersReachesTheTitleOrIsRefused) {
  const CliRun estimate = run({"estimate", "--model", "llama-3-8b", "--runtime", "torchtitan", "--plugin", "torch_fsdp", "--dp", "8", "--seq", "8192",
                               "--gpu", "h100-80g", "--recompute", "full", "--recompute-num-layers", "16"});
  EXPECT_EQ(estimate.code, 0) << estimate.err;
  EXPECT_NE(estimate.out.find("recompute full (16 blocks)"), std::string::npos) << estimate.out;
  const CliRun plan = run({"plan", "--model", "llama-2-70b", "--runtime", "megatron", "--gpus", "64", "--gpu", "h100-80g", "--global-batch", "256",
                           "--seq", "4096", "--tp", "4", "--pp", "4", "--recompute", "full", "--recompute-num-layers", "3", "--top", "2"});
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find(" 1  hybrid_parallel dp 4 × tp 4 × pp 4"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("recompute full (3 blocks per stage)"), std::string::npos) << plan.out;
  const struct {
    std::vector<const char*> args;
    const char* says;
  } refusals[] = {
      {{"estimate", "--model", "gpt2", "--recompute-num-layers", "4"}, "--recompute-num-layers 4 says how many blocks of each model chunk --recompute full recomputes whole; add --recompute full"},
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--recompute-num-layers", "4"}, "--recompute-num-layers 4 says how many blocks of each chunk full recompute recomputes whole: add --recompute full"},
  };
  for (const auto& c : refusals) {
    const CliRun r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.says;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

TEST(Cli, FormatFollowsTheOutputExtension) {
  auto options = parse_estimate_arguments({"--model", "gpt2", "--output", "report.html"});
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->format_value, planner::ReportFormat::html);
  auto explicit_format = parse_estimate_arguments({"--model", "gpt2", "--output", "report.html", "--format", "md"});
  ASSERT_TRUE(explicit_format.ok());
  EXPECT_EQ(explicit_format->format_value, planner::ReportFormat::md);
}

TEST(Cli, OptionsReachThePlannerRequest) {
  auto options = parse_estimate_arguments({"--model", "llama-2-7b", "--plugin", "hybrid_parallel", "--tp", "4", "--pp", "2",
                                           "--sequence-parallel", "--recompute", "selective", "--zero-stage", "1",
                                           "--pp-schedule", "gpipe", "--bucket-mb", "50"});
  ASSERT_TRUE(options.ok()) << options.error().message;
  const planner::EstimateRequest& r = options->request;
  EXPECT_EQ(r.layout.tp, 4);
  EXPECT_EQ(r.layout.pp, 2);
  EXPECT_TRUE(r.layout.sequence_parallel);
  EXPECT_EQ(r.training.recompute, planner::RecomputeMode::selective);
  EXPECT_EQ(r.plugin.kind, planner::PluginKind::hybrid_parallel);
  EXPECT_EQ(r.plugin.effective_zero_stage(), 1);
  EXPECT_EQ(r.plugin.pp_schedule, planner::PipelineSchedule::gpipe);
  EXPECT_EQ(r.plugin.bucket_bytes, int64_t{50} << 20);
}

// Without --plugin, the plugin is the one whose states the runtime describes.
TEST(Cli, TheRuntimeChoosesThePluginWhenNoneIsGiven) {
  for (const auto& [runtime, plugin] : {std::pair{"colossalai", planner::PluginKind::torch_ddp}, std::pair{"megatron", planner::PluginKind::hybrid_parallel},
                                        std::pair{"torchtitan", planner::PluginKind::torch_fsdp}, std::pair{"deepspeed", planner::PluginKind::low_level_zero}}) {
    auto options = parse_estimate_arguments({"--model", "llama-2-7b", "--runtime", runtime});
    ASSERT_TRUE(options.ok()) << options.error().message;
    EXPECT_EQ(options->request.plugin.kind, plugin) << runtime;
  }
  auto given = parse_estimate_arguments({"--model", "llama-2-7b", "--runtime", "colossalai", "--plugin", "gemini"});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->request.plugin.kind, planner::PluginKind::gemini);
}

TEST(Cli, PlanJsonRanksPlansBestFirstWithTheAcceptanceKeys) {
  const tessera::testing::ScratchDir scratch;
  const std::string output = scratch.path("plan.json");
  const CliRun r = run({"plan", "--model", "gpt2-medium", "--gpus", "8", "--gpu", "h100-80g", "--global-batch", "64", "--seq", "1024",
                        "--format", "json", "--output", output.c_str()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema"], 1);
  ASSERT_GE(doc["plans"].size(), 2u);
  double previous = 1e300;
  for (const auto& plan : doc["plans"]) {
    for (const char* key : {"plugin", "settings", "fits", "memory", "step_time_s", "tokens_per_s"}) EXPECT_TRUE(plan.contains(key)) << key;
    EXPECT_TRUE(plan["fits"].get<bool>());
    EXPECT_LE(plan["tokens_per_s"].get<double>(), previous);
    previous = plan["tokens_per_s"].get<double>();
    EXPECT_TRUE(plan["memory"]["ranks"][0]["categories"]["activations"].contains("device_bytes"));
  }
  std::ifstream written(output);
  EXPECT_EQ(nlohmann::json::parse(written), doc) << "plan.json holds what was printed";
  std::remove(output.c_str());
}

// A plan made under --runtime deepspeed keeps the runtime in plan.json, and its
// export is the ZeRO-3 config the plan was counted with; ColossalAI's script,
// which would not keep those states, is refused with the way back.
TEST(Cli, PlanUnderARuntimeExportsThatRuntimesConfig) {
  const tessera::testing::ScratchDir scratch;
  const std::string output = scratch.path("plan.json");
  const CliRun r = run({"plan", "--model", "llama-2-13b", "--gpus", "8", "--gpu", "rtx4090-24g", "--global-batch", "64", "--seq", "2048",
                        "--runtime", "deepspeed", "--output", output.c_str()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("DeepSpeed ZeRO-3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("low_level_zero stage 3 + cpu offload"), std::string::npos) << r.out;
  std::ifstream written(output);
  const auto doc = nlohmann::json::parse(written);
  EXPECT_EQ(doc["plans"][0]["runtime"], "deepspeed");
  EXPECT_EQ(doc["search"]["runtime"], "deepspeed");
  // Plan 1 recomputes every block, which a DeepSpeed config cannot turn on; plan 3 recomputes nothing.
  ASSERT_EQ(doc["plans"][2]["training"]["recompute"], "none");
  const CliRun config = run({"export", output.c_str(), "--to", "deepspeed", "--plan", "3"});
  ASSERT_EQ(config.code, 0) << config.err;
  const auto zero = nlohmann::json::parse(config.out)["zero_optimization"];
  EXPECT_EQ(zero["stage"], 3);
  EXPECT_EQ(zero["offload_optimizer"]["device"], "cpu");
  const CliRun script = run({"export", output.c_str(), "--to", "colossalai"});
  EXPECT_EQ(script.code, 2);
  EXPECT_NE(script.err.find("plan again with --runtime colossalai"), std::string::npos) << script.err;
}

// A torchtitan plan exported as its job config and the run's metrics lines read back.
TEST(Cli, PlanUnderTorchtitanExportsAJobConfigAndComparesItsLog) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  ASSERT_EQ(run({"plan", "--runtime", "torchtitan", "--model", "llama-3-8b", "--gpus", "8", "--global-batch", "16", "--seq", "8192", "--output",
                 plan.c_str()}).code, 0);
  const std::string config = scratch.path("llama3_8b.toml");
  const CliRun exported = run({"export", plan.c_str(), "--to", "torchtitan", "--output", config.c_str()});
  ASSERT_EQ(exported.code, 0) << exported.err;
  std::ifstream in(config);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("flavor = \"8B\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("data_parallel_shard_degree = 8\n"), std::string::npos) << text;
  EXPECT_NE(text.find("global_batch_size = 16"), std::string::npos) << text;
  const std::string log = scratch.path("torchtitan.log");
  {
    std::ofstream out(log);
    for (const auto& [step, tps] : {std::pair{1, "900"}, std::pair{5, "5,000"}, std::pair{10, "5,100"}, std::pair{15, "4,900"}}) {
      out << "[rank0]:[titan] INFO - step: " << std::setw(2) << step << "  loss:  9.00000  grad_norm:  1.0000  memory: 50.00GiB(63.17%)  tps: " << tps
          << "  tflops: 280.00  mfu: 28.31%\n";
    }
  }
  const CliRun json_run = run({"compare", plan.c_str(), log.c_str(), "--format", "json"});
  ASSERT_EQ(json_run.code, 0) << json_run.err;
  const auto doc = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(doc["runtime"], "torchtitan");
  // 16 sequences of 8192 tokens over 8 GPUs at the median of 5,000, 5,100 and 4,900 tokens/s each.
  EXPECT_DOUBLE_EQ(doc["step_time"]["measured_s"].get<double>(), 16.0 * 8192 / (5000.0 * 8));
}

// The log of the Megatron-LM run a plan was exported to, set against the plan:
// the step's median after the warm-up interval, tokens/s, each reported rank's peak.
TEST(Cli, CompareSetsAMegatronLogAgainstItsPlan) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json");
  ASSERT_EQ(run({"plan", "--runtime", "megatron", "--model", "llama-2-7b", "--gpus", "16", "--global-batch", "64", "--seq", "4096", "--tp", "2",
                 "--pp", "2", "--output", plan.c_str()}).code, 0);
  const std::string log = scratch.path("megatron.log");
  {
    std::ofstream out(log);
    for (const auto& [iteration, ms] : {std::pair{5, 5000.0}, std::pair{10, 2000.0}, std::pair{15, 2200.0}, std::pair{20, 2100.0}}) {
      out << " [2026-12-07 04:00:00] iteration " << std::setw(8) << iteration << "/      30 | consumed samples: " << std::setw(12) << iteration * 64
          << " | elapsed time per iteration (ms): " << std::fixed << std::setprecision(1) << ms
          << " | learning rate: 1.000000E-04 | global batch size:    64 | lm loss: 1.037452E+01 | loss scale: 1.0 |\n";
      if (iteration == 5) out << "[Rank 15] (after 5 iterations) memory (MB) | allocated: 20000.0 | max allocated: 40960.0 | reserved: 43000.0 | max reserved: 43008.0\n";
    }
  }
  const CliRun table = run({"compare", plan.c_str(), log.c_str()});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("step time"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("2.100 s"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("median of 3 logged steps, the first (warm-up) left out"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("40.00 GiB"), std::string::npos) << table.out;
  const CliRun json_run = run({"compare", plan.c_str(), log.c_str(), "--format", "json"});
  ASSERT_EQ(json_run.code, 0) << json_run.err;
  const auto doc = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(doc["kind"], "logged_run_comparison");
  EXPECT_EQ(doc["runtime"], "Megatron-LM");
  EXPECT_DOUBLE_EQ(doc["step_time"]["measured_s"].get<double>(), 2.1);
  EXPECT_EQ(doc["ranks"][0]["rank"], 15);
  EXPECT_EQ(doc["ranks"][0]["pipeline_stage"], 1);
  EXPECT_EQ(doc["ranks"][0]["measured_max_allocated_bytes"], int64_t{40960} << 20);
  const CliRun beyond = run({"compare", plan.c_str(), log.c_str(), "--plan", "99"});
  EXPECT_EQ(beyond.code, 2);
  EXPECT_NE(beyond.err.find("--plan 99 is out of range"), std::string::npos) << beyond.err;
}

// plan.json is JSON whatever the name; a report's extension is refused rather than filled with JSON.
TEST(Cli, PlanRefusesToWriteJsonUnderAReportsName) {
  const CliRun r = run({"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--output", "plan.html"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("tessera: error: --output plan.html: tessera plan writes the plan document, JSON; name it .json", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("tessera estimate --output FILE.html"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

TEST(Cli, PlanBadInputsAreOneLineAndExitCodeTwo) {
  const std::string missing_field = std::string(TESSERA_CLI_TEST_DATA) + "/cluster-missing-gpus-per-node.json";
  struct Case {
    std::vector<const char*> args;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "100", "--dp", "8", "--micro-batch", "4"}, "--global-batch 100 is not divisible"},
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--dp", "2", "--tp", "2", "--pp", "1"}, "but the cluster has 8 GPUs"},
      {{"plan", "--model", "gpt2", "--gpus", "16", "--global-batch", "64", "--tp", "16"}, "exceeds --gpus-per-node 8"},
      {{"plan", "--model", "gpt2", "--gpu", "h900", "--global-batch", "64"}, "--gpu: 'h900' is not a known GPU"},
      {{"plan", "--model", "gpt2", "--cluster", missing_field.c_str(), "--global-batch", "64"}, "missing field 'gpus_per_node'"},
      {{"plan", "--model", "gpt2", "--gpus", "12", "--global-batch", "64"}, "not a whole number of nodes"},
      {{"plan", "--model", "gpt2", "--global-batch", "0"}, "--global-batch must be a positive integer"},
      // Filters that leave no candidate before memory is considered: a usage error, not "NOTHING FITS".
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--micro-batch", "7"}, "--micro-batch 7 does not divide --global-batch 64"},
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--plugin", "gemini", "--tp", "2"}, "need --plugin hybrid_parallel"},
      {{"plan", "--model", "gpt2", "--gpus", "8", "--global-batch", "64", "--dp", "4", "--tp", "4"}, "--dp 4 × --tp 4 = 16 does not divide the 8 GPUs"},
      // torchtitan's op-level policy is searched under its runtime only.
      {{"plan", "--model", "llama-3-8b", "--gpus", "8", "--global-batch", "64", "--recompute", "op_selective"},
       "--recompute op_selective is torchtitan's op-level checkpointing: add --runtime torchtitan"},
  };
  for (const Case& c : cases) {
    const CliRun r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.mentions;
    EXPECT_TRUE(r.out.empty()) << c.mentions;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.mentions), std::string::npos) << r.err;
  }
}

// plan.json (the planner's estimate) and metrics.json (the engine's ledger)
// agree on every category, in fp32 and mixed precision, for each recompute mode.
TEST(Cli, TrainWritesPlanAndMetricsThatCompareExactly) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  for (const char* precision : {"fp32", "bf16", "fp16"})
  for (const char* recompute : {"none", "selective", "full"}) {
    const CliRun trained = run({"train", "--model", "tiny-gpt2", "--steps", "2", "--micro-batch", "2", "--seq", "32", "--precision", precision,
                                "--recompute", recompute, "--out", dir.c_str()});
    ASSERT_EQ(trained.code, 0) << trained.err;
    std::ifstream metrics_file(dir + "/metrics.json");
    const auto metrics = nlohmann::json::parse(metrics_file);
    EXPECT_EQ(metrics["loss"].size(), 2u);
    EXPECT_EQ(metrics["training"]["precision"], precision);
    std::ifstream config_file(dir + "/config.json");
    EXPECT_EQ(nlohmann::json::parse(config_file)["torch_dtype"], "float32") << "model.safetensors holds fp32 weights in every precision";
    EXPECT_GT(metrics["ranks"][0]["categories"]["activations"]["device_bytes"].get<int64_t>(), 0);
    const CliRun compared = run({"compare", (dir + "/plan.json").c_str(), (dir + "/metrics.json").c_str(), "--format", "json"});
    ASSERT_EQ(compared.code, 0) << compared.err;
    const auto rows = nlohmann::json::parse(compared.out)["categories"];
    ASSERT_EQ(rows.size(), 10u);
    for (const auto& row : rows) {
      EXPECT_TRUE(row.contains("predicted_bytes") && row.contains("measured_bytes"));
      EXPECT_EQ(row["error_pct"].get<double>(), 0.0) << precision << ", recompute " << recompute << ": " << row.dump();
    }
    std::filesystem::remove_all(dir);
  }
}

// --resume with a checkpoint at --steps or past it trains nothing and says at
// which step the checkpoint is.
TEST(Cli, ResumeNamesTheCheckpointsStepWhenThereIsNothingToTrain) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  const auto train = [&](const char* steps, bool resume) {
    std::vector<const char*> args = {"train", "--model", "tiny-gpt2", "--steps", steps, "--micro-batch", "1", "--seq", "16", "--out", dir.c_str()};
    if (resume) args.push_back("--resume");
    return run(args);
  };
  ASSERT_EQ(train("3", false).code, 0);
  const CliRun past = train("2", true);
  EXPECT_EQ(past.code, 0) << past.err;
  EXPECT_NE(past.out.find("nothing to train: the checkpoint in " + dir + " is at step 3, past --steps 2; give a larger --steps to train on\n"),
            std::string::npos) << past.out;
  const CliRun at = train("3", true);
  EXPECT_NE(at.out.find("nothing to train: the checkpoint in " + dir + " is at step 3, the --steps asked for\n"), std::string::npos) << at.out;
}

// A tessera built in another tree (tools/gpu-check's prepared programs) trains
// on the shipped text under TESSERA_DATA_DIR: a folder without it is named in
// the one-line error, a copy of data/ there trains.
TEST(Cli, TrainReadsTheShippedTextUnderTesseraDataDir) {
  const tessera::testing::ScratchDir scratch;
  const std::string elsewhere = scratch.path("elsewhere");
  ::setenv("TESSERA_DATA_DIR", elsewhere.c_str(), 1);
  const CliRun missing = run({"train", "--model", "tiny-gpt2", "--steps", "1", "--micro-batch", "2", "--seq", "32", "--out", scratch.path("missing").c_str()});
  std::filesystem::create_directories(elsewhere + "/text");
  std::filesystem::copy_file(std::string(TESSERA_SOURCE_DIR) + "/data/text/kjv-genesis-exodus.txt", elsewhere + "/text/kjv-genesis-exodus.txt");
  const CliRun trained = run({"train", "--model", "tiny-gpt2", "--steps", "1", "--micro-batch", "2", "--seq", "32", "--out", scratch.path("trained").c_str()});
  ::unsetenv("TESSERA_DATA_DIR");
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;
  EXPECT_NE(missing.err.find("'" + elsewhere + "/text/kjv-genesis-exodus.txt'"), std::string::npos) << missing.err;
  EXPECT_EQ(trained.code, 0) << trained.err;
}

// A config.json field the engine would not compute stops `tessera train` with one
// line naming the field and the fix; a window no shorter than --seq trains; the
// run's config.json says its weights are fp32 under both of transformers' names.
TEST(Cli, TrainRefusesTorchtitansOpLevelPolicy) {
  const CliRun r = run({"train", "--model", "tiny-llama", "--steps", "1", "--recompute", "op_selective", "--out", "unused-run"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("the engine recomputes none, selective or full"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists("unused-run"));
}

TEST(Cli, TrainRefusesConfigFieldsItWouldNotComputeAndSaysTheWeightsAreFp32) {
  const tessera::testing::ScratchDir scratch;
  const auto config_with = [&](const char* model, const std::string& fields, const char* name) {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/models/" + model + ".json");
    nlohmann::json config = nlohmann::json::parse(in);
    config.update(nlohmann::json::parse(fields));
    const std::string path = scratch.path(name);
    std::ofstream(path) << config.dump();
    return path;
  };
  const std::string dir = scratch.path("run");
  struct Refused { const char* model; const char* fields; const char* seq; const char* says; };
  for (const Refused& c : {Refused{"tiny-gpt2", R"({"activation_function":"gelu"})", "32", "activation_function is 'gelu'"},
                           Refused{"tiny-gpt2", R"({"activation_function":"quick_gelu"})", "32", R"(set activation_function to "gelu_new")"},
                           Refused{"tiny-llama", R"({"rope_scaling":{"rope_type":"llama3","factor":8.0}})", "32", "remove rope_scaling"},
                           Refused{"tiny-llama", R"({"rope_parameters":{"rope_type":"linear","factor":2.0}})", "32", "rope_parameters asks for 'linear'"},
                           Refused{"tiny-llama", R"({"model_type":"mistral","sliding_window":16})", "32", "use --seq 16 or less"}}) {
    const std::string path = config_with(c.model, c.fields, "refused.json");
    const CliRun r = run({"train", "--model", path.c_str(), "--steps", "1", "--micro-batch", "1", "--seq", c.seq, "--out", dir.c_str()});
    EXPECT_EQ(r.code, 2) << c.fields;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/config.json")) << "refused before writing the run";
  }
  const std::string windowed = config_with("tiny-llama", R"({"model_type":"mistral","sliding_window":32,"dtype":"bfloat16"})", "windowed.json");
  const CliRun trained = run({"train", "--model", windowed.c_str(), "--steps", "1", "--micro-batch", "1", "--seq", "32", "--precision", "bf16",
                              "--out", dir.c_str()});
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::ifstream saved(dir + "/config.json");
  const auto config = nlohmann::json::parse(saved);
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["dtype"], "float32") << "transformers 5 reads dtype before torch_dtype";
  EXPECT_EQ(config["sliding_window"], 32);
}

// A plan of one model against the metrics of another is refused in one line;
// one model under two names (a config.json copied under another) is compared,
// with a note on standard error that says so.
TEST(Cli, CompareRefusesAnotherModelAndNotesAnotherName) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  const std::string estimate = scratch.path("gpt2.json");
  ASSERT_EQ(run({"train", "--steps", "1", "--micro-batch", "1", "--seq", "16", "--out", dir.c_str()}).code, 0);
  ASSERT_EQ(run({"estimate", "--model", "gpt2", "--format", "json", "--output", estimate.c_str()}).code, 0);
  const CliRun same = run({"compare", (dir + "/plan.json").c_str(), (dir + "/metrics.json").c_str()});
  EXPECT_EQ(same.code, 0);
  EXPECT_EQ(same.err, "");
  const CliRun different = run({"compare", estimate.c_str(), (dir + "/metrics.json").c_str()});
  EXPECT_EQ(different.code, 2);
  EXPECT_EQ(different.out, "");
  EXPECT_EQ(different.err, "tessera: error: " + estimate + " is for gpt2 (124.4M parameters) but " + dir + "/metrics.json measured tiny-gpt2 (437.8K "
                           "parameters): compare a run with the plan of its own model (the run's own plan.json)\n");
  const std::string renamed_config = scratch.path("renamed-gpt2.json"), renamed = scratch.path("renamed-estimate.json");
  std::filesystem::copy_file(std::string(TESSERA_SOURCE_DIR) + "/models/tiny-gpt2.json", renamed_config);
  ASSERT_EQ(run({"estimate", "--model", renamed_config.c_str(), "--seq", "16", "--format", "json", "--output", renamed.c_str()}).code, 0);
  const CliRun noted = run({"compare", renamed.c_str(), (dir + "/metrics.json").c_str()});
  EXPECT_EQ(noted.code, 0);
  EXPECT_EQ(noted.err, "tessera: note: " + renamed + " is for renamed-gpt2 but " + dir + "/metrics.json measured tiny-gpt2, a model of as many "
                       "parameters; the errors below compare the two\n");
}

// A metrics.json for the 4-rank DDP run of `estimate`, as a distributed
// `tessera train` writes it: one row per rank, each measuring the estimate's
// row exactly, with `edit` applied to every rank's categories.
nlohmann::json four_rank_metrics(const nlohmann::json& estimate, const std::function<void(int rank, nlohmann::json& categories)>& edit) {
  nlohmann::json metrics{{"schema", 1}, {"kind", "metrics"}, {"device", "cpu"}};
  for (const char* key : {"model", "plugin", "settings", "layout", "training", "assumptions"}) metrics[key] = estimate[key];
  metrics["ranks"] = nlohmann::json::array();
  for (int rank = 0; rank < 4; ++rank) {
    nlohmann::json categories = estimate["ranks"][0]["categories"];
    edit(rank, categories);
    metrics["ranks"].push_back(nlohmann::json{{"ranks", {rank, rank}}, {"categories", categories}});
  }
  return metrics;
}

// `tessera estimate --format json` of gpt2 on 4 GPUs under DDP, written to `path` and read back; null when it failed.
nlohmann::json four_gpu_ddp_estimate(const std::string& path) {
  const CliRun estimated = run({"estimate", "--model", "gpt2", "--dp", "4", "--plugin", "torch_ddp", "--format", "json", "--output", path.c_str()});
  EXPECT_EQ(estimated.code, 0) << estimated.err;
  std::ifstream file(path);
  const auto estimate = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  return estimate.is_discarded() ? nlohmann::json() : estimate;
}

void write_json(const std::string& path, const nlohmann::json& doc) { std::ofstream(path) << doc.dump(2); }

size_t longest_line(const std::string& text) {
  size_t longest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  return longest;
}

// A real 4-GPU DDP estimate (one row for ranks 0-3) against four measured
// ranks, rank 2's activations measuring 25% more than predicted.
TEST(Cli, CompareListsEveryRankOfAFourRankRunAndTheOffOne) {
  const tessera::testing::ScratchDir scratch;
  const std::string estimate_path = scratch.path("estimate.json"), metrics_path = scratch.path("metrics.json");
  const nlohmann::json estimate = four_gpu_ddp_estimate(estimate_path);
  ASSERT_TRUE(estimate.is_object());
  ASSERT_EQ(estimate["ranks"].size(), 1u);
  ASSERT_EQ(estimate["ranks"][0]["ranks"], nlohmann::json::array({0, 3}));
  const int64_t predicted = estimate["ranks"][0]["categories"]["activations"]["device_bytes"];
  ASSERT_EQ(predicted % 4, 0);
  write_json(metrics_path, four_rank_metrics(estimate, [&](int rank, nlohmann::json& categories) {
               if (rank == 2) categories["activations"]["device_bytes"] = predicted / 4 * 5;
             }));

  const CliRun compared = run({"compare", estimate_path.c_str(), metrics_path.c_str(), "--format", "json"});
  ASSERT_EQ(compared.code, 0) << compared.err;
  const auto doc = nlohmann::json::parse(compared.out);
  EXPECT_EQ(doc["kind"], "comparison");
  ASSERT_EQ(doc["ranks"].size(), 4u);
  for (int rank = 0; rank < 4; ++rank) {
    const auto& entry = doc["ranks"][static_cast<size_t>(rank)];
    EXPECT_EQ(entry["rank"], rank);
    ASSERT_EQ(entry["categories"].size(), 10u);
    for (const auto& row : entry["categories"]) {
      const bool off = rank == 2 && row["category"] == "activations";
      EXPECT_NEAR(row["error_pct"].get<double>(), off ? -20.0 : 0.0, 1e-9) << rank << ": " << row.dump();
      EXPECT_EQ(row["predicted_host_bytes"], 0);
      EXPECT_EQ(row["measured_host_bytes"], 0);
      EXPECT_EQ(row["host_error_pct"], 0.0);
    }
  }
  const auto& off = doc["ranks"][2]["categories"][4];
  EXPECT_EQ(off["category"], "activations");
  EXPECT_EQ(off["predicted_bytes"], predicted);
  EXPECT_EQ(off["measured_bytes"], predicted / 4 * 5);
  EXPECT_NEAR(doc["max_abs_error_pct"].get<double>(), 20.0, 1e-9);
  // The one-rank keys stay: rank 0's device rows.
  ASSERT_EQ(doc["categories"].size(), 10u);
  EXPECT_EQ(doc["categories"][4], (nlohmann::json{{"category", "activations"}, {"predicted_bytes", predicted}, {"measured_bytes", predicted}, {"error_pct", 0.0}}));

  // The table: the ranks differ, so one block per rank, no host columns.
  const CliRun table = run({"compare", estimate_path.c_str(), metrics_path.c_str()});
  ASSERT_EQ(table.code, 0) << table.err;
  for (const char* header : {"rank 0\n", "\n\nrank 1\n", "\n\nrank 2\n", "\n\nrank 3\n"}) EXPECT_NE(table.out.find(header), std::string::npos) << header;
  EXPECT_NE(table.out.find("-20.0%"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("host"), std::string::npos) << table.out;
  EXPECT_LE(longest_line(table.out), 100u) << table.out;
}

// Ranks that agree make one table, and host bytes bring the host columns.
TEST(Cli, CompareShowsOneTableWhenAllRanksAgree) {
  const tessera::testing::ScratchDir scratch;
  const std::string estimate_path = scratch.path("estimate.json"), metrics_path = scratch.path("metrics.json");
  const nlohmann::json estimate = four_gpu_ddp_estimate(estimate_path);
  ASSERT_TRUE(estimate.is_object());
  write_json(metrics_path, four_rank_metrics(estimate, [](int, nlohmann::json& categories) { categories["optimizer_states"]["host_bytes"] = 1 << 20; }));
  const CliRun table = run({"compare", estimate_path.c_str(), metrics_path.c_str()});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.out.rfind("ranks 0-3\n", 0), 0u) << table.out;
  EXPECT_EQ(table.out.find("rank 1"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("host measured"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("1.00 MiB"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("-100.0%"), std::string::npos) << table.out;  // host: predicted none, measured 1 MiB
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 12) << table.out;  // ranks, header, ten categories
  EXPECT_LE(longest_line(table.out), 100u) << table.out;
  const auto doc = nlohmann::json::parse(run({"compare", estimate_path.c_str(), metrics_path.c_str(), "--format", "json"}).out);
  EXPECT_EQ(doc["ranks"][3]["categories"][3]["measured_host_bytes"], 1 << 20);
  EXPECT_EQ(doc["max_abs_error_pct"], 100.0);
}

// A fifth measured rank for a 4-GPU plan: the error names both files and the rank.
TEST(Cli, CompareRefusesARankThePlanDoesNotCover) {
  const tessera::testing::ScratchDir scratch;
  const std::string estimate_path = scratch.path("estimate.json"), metrics_path = scratch.path("metrics.json");
  const nlohmann::json estimate = four_gpu_ddp_estimate(estimate_path);
  ASSERT_TRUE(estimate.is_object());
  nlohmann::json metrics = four_rank_metrics(estimate, [](int, nlohmann::json&) {});
  nlohmann::json fifth = metrics["ranks"][3];
  fifth["ranks"] = {4, 4};
  metrics["ranks"].push_back(fifth);
  write_json(metrics_path, metrics);
  const CliRun compared = run({"compare", estimate_path.c_str(), metrics_path.c_str()});
  EXPECT_EQ(compared.code, 2);
  EXPECT_TRUE(compared.out.empty());
  EXPECT_EQ(compared.err, "tessera: error: " + metrics_path + " has rank 4, which " + estimate_path +
                              " does not cover (it predicts ranks 0-3)\n");
}

// docs/metrics-json.md documents every top-level key `tessera train` writes.
TEST(Cli, MetricsDocumentationCoversEveryKey) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  ASSERT_EQ(run({"train", "--steps", "1", "--micro-batch", "1", "--seq", "16", "--out", dir.c_str()}).code, 0);
  std::ifstream metrics_file(dir + "/metrics.json");
  const auto metrics = nlohmann::json::parse(metrics_file);
  std::ifstream doc_file(std::string(TESSERA_SOURCE_DIR) + "/docs/metrics-json.md");
  const std::string doc((std::istreambuf_iterator<char>(doc_file)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(doc.empty());
  for (const auto& [key, value] : metrics.items()) EXPECT_NE(doc.find("| `" + key + "` |"), std::string::npos) << key << " is not documented";
}

TEST(Cli, TrainRunsTheBestPlanOfAPlanFile) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  const std::string plan = scratch.path("plan.json");
  ASSERT_EQ(run({"plan", "--model", "tiny-gpt2", "--gpus", "1", "--global-batch", "8", "--seq", "32", "--precision", "fp32", "--output", plan.c_str()}).code, 0);
  const CliRun trained = run({"train", "--plan", plan.c_str(), "--steps", "2", "--out", dir.c_str()});
  ASSERT_EQ(trained.code, 0) << trained.err;
  std::ifstream metrics_file(dir + "/metrics.json");
  const auto metrics = nlohmann::json::parse(metrics_file);
  EXPECT_EQ(metrics["training"]["seq_len"], 32);
  EXPECT_EQ(metrics["training"]["micro_batch_size"].get<int64_t>() * metrics["training"]["num_micro_batches"].get<int64_t>(), 8);
  // --plan-number N trains the file's N-th plan, as export and compare's --plan N pick it.
  std::ifstream plan_file(plan);
  const auto document = nlohmann::json::parse(plan_file);
  ASSERT_GE(document["plans"].size(), 2u);
  const std::string second_dir = scratch.path("second");
  const CliRun second = run({"train", "--plan", plan.c_str(), "--plan-number", "2", "--steps", "1", "--out", second_dir.c_str()});
  ASSERT_EQ(second.code, 0) << second.err;
  std::ifstream second_metrics_file(second_dir + "/metrics.json");
  const auto second_metrics = nlohmann::json::parse(second_metrics_file);
  for (const char* field : {"micro_batch_size", "num_micro_batches", "recompute"}) {
    EXPECT_EQ(second_metrics["training"][field], document["plans"][1]["training"][field]) << field;
  }
  EXPECT_EQ(second_metrics["plugin"], document["plans"][1]["plugin"]);
  const CliRun beyond = run({"train", "--plan", plan.c_str(), "--plan-number", "99", "--steps", "1", "--out", second_dir.c_str()});
  EXPECT_EQ(beyond.code, 2);
  EXPECT_EQ(beyond.err, "tessera: error: --plan-number 99: " + plan + " holds plans 1 to " + std::to_string(document["plans"].size()) + "\n");
}

TEST(Cli, TrainBadInputsAreOneLineAndExitCodeTwo) {
  for (const auto& args : std::vector<std::vector<const char*>>{
           {"train", "--out", "/tmp/tessera-never", "--data", "/nonexistent/text.txt"},
           {"train", "--out", "/tmp/tessera-never", "--precision", "fp8"},
           {"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g"},
           {"train", "--out", "/tmp/tessera-never", "--dp", "2"},
           {"train", "--out", "/tmp/tessera-never", "--plugin", "gemini"},
           {"train", "--out", "/tmp/tessera-never", "--activation-profile", "megatron"},
           {"train", "--out", "/tmp/tessera-never", "--precision", "fp16", "--loss-scale", "0"},
           {"train", "--out", "/tmp/tessera-never", "--tp", "2"},
           {"train", "--out", "/tmp/tessera-never", "--pp", "2"},
           {"train", "--out", "/tmp/tessera-never", "--loss-scale", "1024"},
           {"train", "--out", "/tmp/tessera-never", "--plan", "/nonexistent/plan.json", "--model", "gpt2"},
           {"train", "--out", "/tmp/tessera-never", "--model", "opt-1.3b"},
           {"train", "--out", "/tmp/tessera-never", "--steps", "0"},
           {"compare", "/nonexistent/plan.json", "/nonexistent/metrics.json"}}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args[3];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Issue 15: `--gpu NAME` refuses, in one line naming the option, what the
// GPU training step does not run (mpirun's ranks: tests/parallel/gpu_refusals.sh); then, on a machine without a GPU, says
// there is none (or that the build has no CUDA).
// Without --precision a GPU run is bf16, the step's precision, so the plain
// command gets as far as the device too.
TEST(Cli, TrainOnAGpuSaysWhyItCannot) {
  for (const auto& args : std::vector<std::vector<const char*>>{{"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g", "--precision", "bf16"},
                                                                {"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g"}}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    if (!tessera::engine::cuda_device_presence().available) {
      const bool explained = r.err.find("no CUDA device is available") != std::string::npos ||
                             r.err.find("built without CUDA (TESSERA_CUDA=OFF)") != std::string::npos;
      EXPECT_TRUE(explained) << r.err;
      EXPECT_NE(r.err.find("train on the CPU with --gpu cpu"), std::string::npos) << r.err;
    }
  }
}

// Gradient accumulation, ZeRO-1/2 and FSDP are not refused on one GPU: without a device the run gets as
// far as looking for one (ZeRO-Offload needs 2 or more ranks: tests/parallel/gpu_refusals.sh).
TEST(Cli, TrainOnAGpuTakesSeveralMicroBatchesZeroAndFsdp) {
  if (tessera::engine::cuda_device_presence().available) GTEST_SKIP() << "a CUDA device is here: the run would train";
  for (const std::vector<const char*>& options : std::vector<std::vector<const char*>>{
           {"--micro-batches", "2"}, {"--plugin", "low_level_zero", "--zero-stage", "1"}, {"--plugin", "low_level_zero", "--zero-stage", "2"},
           {"--plugin", "torch_fsdp"}, {"--plugin", "torch_fsdp", "--fsdp-strategy", "shard_grad_op"}}) {
    std::vector<const char*> args{"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g", "--precision", "bf16"};
    args.insert(args.end(), options.begin(), options.end());
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err.find(options[0]), std::string::npos) << r.err;
    const bool explained = r.err.find("no CUDA device is available") != std::string::npos ||
                           r.err.find("built without CUDA (TESSERA_CUDA=OFF)") != std::string::npos;
    EXPECT_TRUE(explained) << r.err;
  }
}

// Selective and full recompute are not refused: without a device the run gets as far as looking for one.
TEST(Cli, TrainOnAGpuRecomputesSelectiveOrFull) {
  if (tessera::engine::cuda_device_presence().available) GTEST_SKIP() << "a CUDA device is here: the run would train";
  for (const char* mode : {"selective", "full"}) {
    const CliRun r = run({"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g", "--precision", "bf16", "--recompute", mode});
    EXPECT_EQ(r.code, 2) << mode;
    EXPECT_EQ(r.err.find("--recompute"), std::string::npos) << r.err;
    const bool explained = r.err.find("no CUDA device is available") != std::string::npos ||
                           r.err.find("built without CUDA (TESSERA_CUDA=OFF)") != std::string::npos;
    EXPECT_TRUE(explained) << r.err;
  }
}

TEST(Cli, TrainOnAGpuRefusesWhatTheStepDoesNotRun) {
  struct Refusal {
    std::vector<std::string> options;
    std::string message;
  };
  for (const Refusal& refusal : std::vector<Refusal>{
           {{"--precision", "fp32"}, "tessera: error: --precision fp32: the GPU training step runs bf16 mixed precision; use --precision bf16\n"},
           {{"--activation-profile", "tessera"},
            "tessera: error: --activation-profile tessera: the engine's GPU step keeps the tessera_gpu profile's activations; use tessera_gpu\n"},
           {{"--precision", "bf16", "--recompute", "op_selective"},
            "tessera: error: --recompute op_selective is torchtitan's policy, for estimates of its runs; the engine recomputes none, selective or full\n"},
           {{"--precision", "bf16", "--plugin", "torch_fsdp", "--cpu-offload"},
            "tessera: error: --cpu-offload: on GPUs the engine offloads the shards of 2 or more data-parallel ranks; give --dp 2 or more, or leave it out\n"},
           {{"--precision", "bf16", "--plugin", "low_level_zero", "--cpu-offload"},
            "tessera: error: --cpu-offload: on GPUs the engine offloads the shards of 2 or more data-parallel ranks; give --dp 2 or more, or leave it out\n"},
           {{"--precision", "bf16", "--dp", "2"},
            "tessera: error: dp 2 × tp 1 × pp 1 needs 2 ranks but no launcher started other ranks; launch with mpirun -np 2 tessera train ...\n"},
           {{"--precision", "bf16", "--optimizer", "sgd"}, "tessera: error: --optimizer sgd: the GPU training step uses AdamW only; use --optimizer adamw\n"},
           {{"--dry-run"},
            "tessera: error: --dry-run replays the CPU engine's allocations (its tessera activations, no CUDA context, cuBLAS or NCCL buffers), "
            "not the GPU step's; leave out --gpu\n"}}) {
    std::vector<const char*> args{"train", "--out", "/tmp/tessera-never", "--gpu", "h100-80g"};
    for (const std::string& option : refusal.options) args.push_back(option.c_str());
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << refusal.message;
    EXPECT_EQ(r.err, refusal.message);
  }
}

TEST(Cli, OutputReplacesOnlyRegularFiles) {
  const tessera::testing::ScratchDir scratch;
  const std::string target = scratch.path("target.json"), link = scratch.path("link.json"), fifo = scratch.path("fifo");
  std::ofstream(target) << "kept";
  std::filesystem::create_symlink(target, link);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No device node (the reported --output /dev/full): run as root, a regression would replace it.
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {link, "a symbolic link"}, {fifo, "a FIFO"}, {scratch.path(), "a directory"}}) {
    const CliRun r = run({"estimate", "--model", "gpt2", "--output", path.c_str()});
    EXPECT_EQ(r.code, 2) << path;
    EXPECT_EQ(r.err, "tessera: error: --output: '" + path + "' is " + kind +
                         "; Tessera only replaces regular files, so give the path of a new or regular file\n");
  }
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  std::ifstream kept(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "kept");
}

TEST(Cli, OutputIsStagedInAUniqueTemporaryWithTheUsualMode) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = scratch.path("report.json");
  std::ofstream(path) << "old";
  // Another writer's temporary under the old fixed name must not be in the way.
  std::filesystem::create_directories(path + ".tmp");
  ASSERT_TRUE(write_file_atomically(path, "new", "--output").ok());
  std::ifstream written(path);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(written), {}), "new");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(scratch.path())) ++entries;
  EXPECT_EQ(entries, 2) << "the file and the other writer's directory, no temporary left";
  const Status refused = write_file_atomically(scratch.path(), "x", "--out");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("--out: '", 0), 0u) << refused.error().message;
}

TEST(Cli, InputsThatAreNotRegularFilesAreRefusedWithoutReading) {
  const tessera::testing::ScratchDir scratch;
  const std::string fifo = scratch.path("config.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), std::string("/dev/urandom"), fifo}) {
    const CliRun r = run({"estimate", "--model", path.c_str()});
    EXPECT_EQ(r.code, 2) << path;
    EXPECT_NE(r.err.find("--model: '" + path + "' is not a regular file ("), std::string::npos) << r.err;
  }
  EXPECT_NE(run({"export", "/dev/zero", "--to", "deepspeed"}).err.find("plan file: '/dev/zero' is not a regular file (a character device)"),
            std::string::npos);
  EXPECT_NE(run({"compare", "/dev/zero", "/dev/zero"}).err.find("metrics: '/dev/zero' is not a regular file"), std::string::npos);
}

// CLI11 alone saturates out-of-range integers, wraps negative ones into
// unsigned options and reads a leading 0 as octal.
TEST(Cli, IntegerOptionsAreRefusedOutOfRangeNotClamped) {
  CLI::App app;
  int64_t steps = 0;
  uint64_t seed = 0;
  app.add_option("--steps", steps);
  app.add_option("--seed", seed);
  check_integer_options(app);
  const auto parse = [&](std::vector<std::string> args) -> std::string {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
    try {
      app.parse(args);
    } catch (const CLI::ParseError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(parse({"--steps", "9223372036854775808"}),
            "--steps: '9223372036854775808' is not a whole number in range -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(parse({"--seed", "-1"}), "--seed: '-1' is not a whole number in range 0 to 18446744073709551615");
  EXPECT_NE(parse({"--seed", "18446744073709551616"}), "");
  EXPECT_NE(parse({"--steps", "0x10"}), "");
  EXPECT_NE(parse({"--steps", "1.5"}), "");
  EXPECT_EQ(parse({"--steps", "-9223372036854775808", "--seed", "18446744073709551615"}), "");
  EXPECT_EQ(steps, INT64_MIN);
  EXPECT_EQ(seed, UINT64_MAX);
  EXPECT_EQ(parse({"--steps", "010"}), "");
  EXPECT_EQ(steps, 10) << "decimal, not octal";

  const CliRun train = run({"train", "--out", "/tmp/tessera-never", "--steps", "9223372036854775808"});
  EXPECT_EQ(train.code, 2);
  EXPECT_NE(train.err.find("--steps: '9223372036854775808' is not a whole number in range"), std::string::npos) << train.err;
  EXPECT_NE(run({"train", "--out", "/tmp/tessera-never", "--seed", "-1"}).err.find("--seed: '-1' is not a whole number"), std::string::npos);
  auto options = parse_estimate_arguments({"--model", "gpt2", "--dp", "010"});
  ASSERT_TRUE(options.ok()) << options.error().message;
  EXPECT_EQ(options->request.layout.dp, 10);
}

TEST(Cli, HelpExitsZero) {
  const CliRun r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("estimate"), std::string::npos);
  const CliRun sub = run({"estimate", "--help"});
  EXPECT_EQ(sub.code, 0);
  EXPECT_NE(sub.out.find("--micro-batch"), std::string::npos);
}

// Issue 16's dry run at full scale: one rank of a 70B FSDP or Gemini plan on
// 1024 GPUs, replayed without data or arithmetic, books what the planner predicts.
TEST(Cli, DryRunsOf70BPlansOn1024GpusMatchThePlanner) {
  for (const char* plugin : {"torch_fsdp", "gemini"}) {
    const tessera::testing::ScratchDir scratch;
    const std::string plan = scratch.path("plan.json"), dir = scratch.path("dry");
    ASSERT_EQ(run({"plan", "--model", "llama-2-70b", "--gpus", "1024", "--gpus-per-node", "8", "--gpu", "h100-80g", "--global-batch", "1024", "--seq",
                   "4096", "--plugin", plugin, "--output", plan.c_str()})
                  .code,
              0);
    const CliRun dry = run({"train", "--plan", plan.c_str(), "--dry-run", "--rank", "517", "--out", dir.c_str()});
    ASSERT_EQ(dry.code, 0) << dry.err;
    EXPECT_NE(dry.out.find("dry run of rank 517 of 1024 (" + std::string(plugin) + ", bf16)"), std::string::npos) << dry.out;
    std::ifstream metrics_file(dir + "/metrics.json");
    const auto metrics = nlohmann::json::parse(metrics_file);
    ASSERT_EQ(metrics["ranks"].size(), 1u);
    EXPECT_EQ(metrics["ranks"][0]["ranks"], nlohmann::json::array({517, 517}));
    const CliRun compared = run({"compare", (dir + "/plan.json").c_str(), (dir + "/metrics.json").c_str(), "--format", "json"});
    ASSERT_EQ(compared.code, 0) << compared.err;
    const auto doc = nlohmann::json::parse(compared.out);
    EXPECT_LE(doc["max_abs_error_pct"].get<double>(), 3.0) << compared.out;
    EXPECT_GT(doc["categories"][4]["measured_bytes"].get<int64_t>(), int64_t{1} << 30) << "activations of a 70B micro-batch of 4096 tokens";
    EXPECT_GT(doc["categories"][7]["measured_bytes"].get<int64_t>(), int64_t{1} << 30) << "gathered units or chunks of a 70B layer";
  }
}

// The dry run replays a tensor-parallel rank of a 70B plan (dp 128 × tp 8 with
// sequence parallelism): its parts of the model, its ZeRO-1 shard over its
// data-parallel group and its activations, against the planner.
TEST(Cli, DryRunOfA70BTensorParallelPlanMatchesThePlanner) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json"), dir = scratch.path("dry");
  ASSERT_EQ(run({"plan", "--model", "llama-2-70b", "--gpus", "1024", "--gpus-per-node", "8", "--gpu", "h100-80g", "--global-batch", "1024", "--seq",
                 "4096", "--plugin", "hybrid_parallel", "--tp", "8", "--pp", "1", "--zero-stage", "1", "--output", plan.c_str()})
                .code,
            0);
  const CliRun dry = run({"train", "--plan", plan.c_str(), "--dry-run", "--rank", "517", "--out", dir.c_str()});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("dry run of rank 517 of 1024 (hybrid_parallel, bf16)"), std::string::npos) << dry.out;
  const CliRun compared = run({"compare", (dir + "/plan.json").c_str(), (dir + "/metrics.json").c_str(), "--format", "json"});
  ASSERT_EQ(compared.code, 0) << compared.err;
  const auto result = nlohmann::json::parse(compared.out);
  EXPECT_LE(result["max_abs_error_pct"].get<double>(), 3.0) << compared.out;
  // Rank 517's eighth of the model: 69.0e9 / 8 parameters in bf16, about 16 GiB.
  EXPECT_NEAR(static_cast<double>(result["categories"][0]["measured_bytes"].get<int64_t>()), 2.0 * 68'976'648'192 / 8, 0.01 * 2.0 * 68'976'648'192 / 8);
  // Training it for real needs its 1024 ranks.
  const CliRun training = run({"train", "--plan", plan.c_str(), "--out", scratch.path("run").c_str()});
  EXPECT_EQ(training.code, 2);
  EXPECT_NE(training.err.find("dp 128 × tp 8 × pp 1 needs 1024 ranks but no launcher started other ranks; launch with mpirun -np 1024"), std::string::npos)
      << training.err;
}

// Gemini's auto placement runs what the planner solved for this machine (the
// optimizer on the host, the parameters on the device, as ColossalAI's auto
// policy), and a static one with a fraction of the parameters' chunks runs
// what ColossalAI makes of it.
TEST(Cli, GeminiAutoPlacementRunsWhatThePlannerSolved) {
  const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path("run");
  const CliRun trained = run({"train", "--plugin", "gemini", "--placement", "auto", "--precision", "bf16", "--steps", "1", "--out", dir.c_str()});
  ASSERT_EQ(trained.code, 0) << trained.err;
  const CliRun compared = run({"compare", (dir + "/plan.json").c_str(), (dir + "/metrics.json").c_str(), "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(compared.out)["max_abs_error_pct"].get<double>(), 0.0) << compared.out;
  std::ifstream metrics_file(dir + "/metrics.json");
  const auto states = nlohmann::json::parse(metrics_file)["ranks"][0]["categories"]["optimizer_states"];
  EXPECT_EQ(states["device_bytes"], 0);
  EXPECT_GT(states["host_bytes"].get<int64_t>(), 0);
  // Half the parameters' chunks asked: ColossalAI moves a chunk only when its
  // memory is above half the total it counts (a chunk once per tensor), which
  // no chunk of tiny-gpt2 is, so all stay on the device, as planned.
  const std::string fractional_dir = scratch.path("static");
  const CliRun fractional = run({"train", "--plugin", "gemini", "--placement", "static", "--offload-optim-frac", "1", "--offload-param-frac", "0.5",
                                 "--precision", "bf16", "--steps", "1", "--out", fractional_dir.c_str()});
  ASSERT_EQ(fractional.code, 0) << fractional.err;
  const CliRun fractional_compared =
      run({"compare", (fractional_dir + "/plan.json").c_str(), (fractional_dir + "/metrics.json").c_str(), "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(fractional_compared.out)["max_abs_error_pct"].get<double>(), 0.0) << fractional_compared.out;
  std::ifstream fractional_metrics(fractional_dir + "/metrics.json");
  EXPECT_EQ(nlohmann::json::parse(fractional_metrics)["ranks"][0]["categories"]["parameters"]["host_bytes"], 0);
  // A device of 6 MiB: auto sends the leading parameter chunks to the host,
  // as many as the planner solved; the ledger books them there. 3 MiB is too
  // little for any placement and is refused before training; -1 is no size.
  const std::string small_dir = scratch.path("small");
  const CliRun small = run({"train", "--plugin", "gemini", "--placement", "auto", "--precision", "bf16", "--chunk-size", "40000", "--micro-batch", "4",
                            "--seq", "64", "--device-memory", "6", "--steps", "1", "--out", small_dir.c_str()});
  ASSERT_EQ(small.code, 0) << small.err;
  const CliRun small_compared = run({"compare", (small_dir + "/plan.json").c_str(), (small_dir + "/metrics.json").c_str(), "--format", "json"});
  EXPECT_EQ(nlohmann::json::parse(small_compared.out)["max_abs_error_pct"].get<double>(), 0.0) << small_compared.out;
  std::ifstream small_metrics(small_dir + "/metrics.json");
  const auto parameters = nlohmann::json::parse(small_metrics)["ranks"][0]["categories"]["parameters"];
  EXPECT_GT(parameters["host_bytes"].get<int64_t>(), 0);
  EXPECT_GT(parameters["device_bytes"].get<int64_t>(), 0);
  const CliRun too_small = run({"train", "--plugin", "gemini", "--placement", "auto", "--precision", "bf16", "--chunk-size", "40000", "--micro-batch",
                                "4", "--seq", "64", "--device-memory", "3", "--out", scratch.path("too-small").c_str()});
  EXPECT_EQ(too_small.code, 2);
  EXPECT_NE(too_small.err.find("--device-memory 3.00 MiB: the plan needs"), std::string::npos) << too_small.err;
  const CliRun negative = run({"train", "--device-memory", "-1", "--out", scratch.path("negative").c_str()});
  EXPECT_EQ(negative.code, 2);
  EXPECT_NE(negative.err.find("--device-memory must be 0"), std::string::npos) << negative.err;
}

TEST(Cli, DryRunRanksOutsideThePlanAreRefused) {
  const tessera::testing::ScratchDir scratch;
  const std::string plan = scratch.path("plan.json"), dir = scratch.path("dry");
  ASSERT_EQ(run({"plan", "--model", "tiny-gpt2", "--gpus", "4", "--global-batch", "16", "--seq", "64", "--precision", "fp32", "--output", plan.c_str()}).code, 0);
  const CliRun outside = run({"train", "--plan", plan.c_str(), "--dry-run", "--rank", "4", "--out", dir.c_str()});
  EXPECT_EQ(outside.code, 2);
  EXPECT_EQ(outside.err, "tessera: error: --rank 4: the plan has ranks 0 to 3; give one of them\n");
  const CliRun without = run({"train", "--rank", "1", "--out", dir.c_str()});
  EXPECT_EQ(without.code, 2);
  EXPECT_EQ(without.err, "tessera: error: --rank applies to --dry-run only; under mpirun each rank knows its own\n");
}

}  // namespace
}  // namespace tessera::cli
