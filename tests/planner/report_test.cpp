#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tessera/planner/report.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

class Reports : public ::testing::Test {
 protected:
  Reports() {
    request.plugin.kind = PluginKind::hybrid_parallel;
    request.layout = ParallelLayout{2, 1, 2, false};
    request.training.num_micro_batches = 4;
    estimate = testing::estimate_or_fail(model, gpu, request);
  }
  const Model model = testing::shipped_model("gpt2-medium");
  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  EstimateRequest request;
  MemoryEstimate estimate;
  std::string render(ReportFormat format) const { return render_estimate(EstimateReport{model, gpu, request, estimate}, format); }
};

TEST_F(Reports, JsonCarriesSchemaCountAndEveryCategoryPerRank) {
  const auto doc = nlohmann::json::parse(render(ReportFormat::json));
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["model"]["parameter_count"], 354'823'168);
  ASSERT_EQ(doc["ranks"].size(), 2u);
  for (const auto& rank : doc["ranks"]) {
    int64_t sum = 0;
    for (MemoryCategory c : kAllMemoryCategories) {
      const auto& entry = rank["categories"][std::string(to_string(c))];
      ASSERT_TRUE(entry.contains("device_bytes") && entry.contains("host_bytes"));
      sum += entry["device_bytes"].get<int64_t>();
    }
    EXPECT_EQ(rank["total"]["device_bytes"].get<int64_t>(), sum);
    EXPECT_EQ(rank["gpu_capacity_bytes"].get<int64_t>(), gpu.memory_bytes);
  }
  EXPECT_EQ(doc["ranks"][1]["ranks"], nlohmann::json::array({2, 3}));
}

TEST_F(Reports, CsvHasOneLinePerRankAndCategoryPlusTotals) {
  const std::string csv = render(ReportFormat::csv);
  const auto lines = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(lines, 1 + 2 * (kNumMemoryCategories + 1));
  EXPECT_EQ(csv.rfind("first_rank,last_rank,", 0), 0u);
}

TEST_F(Reports, HtmlIsSelfContainedWithAnSvgBarPerRank) {
  const std::string html = render(ReportFormat::html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://", html.find("</svg>")), std::string::npos) << "no external resources after the SVG namespace";
  for (MemoryCategory c : kAllMemoryCategories) EXPECT_NE(html.find(std::string(to_string(c))), std::string::npos);
  EXPECT_NE(html.find("ranks 2-3"), std::string::npos);
}

// Issue 14 D14: the HTML chart has a byte axis, its totals never sit on the
// capacity line, and a simulated step adds its time, parts and tokens/s.
TEST_F(Reports, HtmlChartHasAnAxisTotalsClearOfTheCapacityAndTheStep) {
  const std::string without_step = render(ReportFormat::html);
  EXPECT_EQ(without_step.find("<h2>Step</h2>"), std::string::npos);
  for (const char* tick : {">0 GiB<", ">10 GiB<", ">70 GiB<"}) EXPECT_NE(without_step.find(tick), std::string::npos) << tick;
  // A row whose total ends just short of the capacity: its label starts right of the capacity line.
  MemoryEstimate near = estimate;
  RankMemory& row = near.ranks.front();
  row.device_total = row.gpu_capacity - (int64_t{1} << 30);
  const std::string html = render_estimate(EstimateReport{model, gpu, request, near}, ReportFormat::html);
  const auto number_after = [&](const std::string& text, const std::string& key, size_t from) {
    const size_t at = text.find(key, from);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size()));
  };
  const size_t total = html.find(">" + format_bytes(row.device_total) + "</text>");
  ASSERT_NE(total, std::string::npos);
  const double total_x = number_after(html, "<text x=\"", html.rfind("<text", total));
  const double capacity_x = number_after(html, "<line x1=\"", total);
  EXPECT_GT(total_x, capacity_x);
  StepSimulation step;
  step.step_time_s = 0.453;
  step.tokens_per_s = 578309.4;
  step.mfu = 0.402;
  step.breakdown.bubble_s = 0.0043;
  const std::string with_step = render_estimate(EstimateReport{model, gpu, request, estimate, &step}, ReportFormat::html);
  EXPECT_NE(with_step.find("<p>step time 453 ms · 578309 tokens/s · MFU 40.2%</p>"), std::string::npos);
  EXPECT_NE(with_step.find("<tr><td>pipeline bubble</td><td>4.30 ms</td></tr>"), std::string::npos);
}

// An interleaved stage's layer list is cut in the chart's label column, whole in its hover title.
TEST(HtmlReport, ALongLayerListIsCutInTheChartAndWholeInItsTitle) {
  const Model model = testing::shipped_model("llama-2-7b");
  const GpuProfile gpu = testing::shipped_gpu("h100-80g");
  EstimateRequest request;
  request.plugin.kind = PluginKind::hybrid_parallel;
  request.plugin.pp_schedule = PipelineSchedule::interleaved;
  request.plugin.num_model_chunks = 4;
  request.layout = ParallelLayout{1, 1, 4, false};
  request.training.num_micro_batches = 8;
  const MemoryEstimate estimate = testing::estimate_or_fail(model, gpu, request);
  const std::string html = render_estimate(EstimateReport{model, gpu, request, estimate}, ReportFormat::html);
  EXPECT_NE(html.find("<title>rank 0 · stage 0 · layers 0-1, 8-9, 16-17, 24-25</title>rank 0 · stage 0 · layers …</text>"), std::string::npos);
}

TEST(FormatSeconds, KeepsThreeDigits) {
  EXPECT_EQ(format_seconds(0), "0 s");
  EXPECT_EQ(format_seconds(38.5e-6), "38.5 µs");
  EXPECT_EQ(format_seconds(0.0043), "4.30 ms");
  EXPECT_EQ(format_seconds(0.453), "453 ms");
  EXPECT_EQ(format_seconds(14.863), "14.86 s");
}

TEST_F(Reports, TableAndMarkdownGiveTheVerdict) {
  EXPECT_NE(render(ReportFormat::table).find("FITS: every rank leaves at least"), std::string::npos);
  const std::string md = render(ReportFormat::md);
  EXPECT_NE(md.find("| category |"), std::string::npos);
  EXPECT_NE(md.find("**FITS"), std::string::npos);
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(format_bytes(-(int64_t{1} << 20)), "-1.00 MiB");
  EXPECT_EQ(format_bytes(int64_t{700} << 20), "700.0 MiB");
}

}  // namespace
}  // namespace tessera::planner
