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
