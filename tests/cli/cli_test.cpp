// The `tessera` command driven in-process: what a user sees on stdout and stderr.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_app.h"
#include "estimate_options.h"

namespace tessera::cli {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun run(std::vector<const char*> args) {
  args.insert(args.begin(), "tessera");
  std::ostringstream out, err;
  const int code = run_cli(static_cast<int>(args.size()), args.data(), out, err);
  return CliRun{code, out.str(), err.str()};
}

TEST(Cli, ModelsListsEveryShippedModelWithItsCount) {
  const CliRun r = run({"models"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"gpt2-medium", "354,823,168", "llama-2-70b", "68,976,648,192", "bloom-176b", "zero-7.5b"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
  }
  const auto doc = nlohmann::json::parse(run({"models", "--format", "json"}).out);
  EXPECT_GE(doc["models"].size(), 14u);
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

TEST(Cli, BadInputIsOneLineAndExitCodeTwo) {
  for (const auto& args : std::vector<std::vector<const char*>>{
           {"estimate", "--model", "gpt2", "--plugin", "hybrid_parallel", "--tp", "5"},
           {"estimate", "--model", "gpt2", "--gpu", "tpu-v9"},
           {"estimate", "--model", "no-such-model"},
           {"estimate", "--model", "gpt2", "--dp", "abc"},
           {"estimate", "--model", "gpt2", "--precision", "fp8"},
           {"estimate"},
           {"frobnicate"}}) {
    const CliRun r = run(args);
    EXPECT_EQ(r.code, 2) << args.back();
    EXPECT_TRUE(r.out.empty()) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("tessera: error: ", 0), 0u) << r.err;
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

TEST(Cli, HelpExitsZero) {
  const CliRun r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("estimate"), std::string::npos);
  const CliRun sub = run({"estimate", "--help"});
  EXPECT_EQ(sub.code, 0);
  EXPECT_NE(sub.out.find("--micro-batch"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
