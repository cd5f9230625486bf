#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tessera/planner/json_io.h"
#include "tessera/planner/registry.h"

namespace tessera::planner {
namespace {

TEST(Hardware, EveryShippedProfileParsesAndIsNamedAfterItsFile) {
  const auto names = shipped_gpu_names();
  ASSERT_GE(names.size(), 7u);
  for (const std::string& name : names) {
    auto gpu = load_gpu(name);
    ASSERT_TRUE(gpu.ok()) << gpu.error().message;
    EXPECT_EQ(gpu->name, name);
    EXPECT_EQ(gpu->usable_memory_bytes, gpu->memory_bytes - gpu->cuda_context_bytes) << name;
    EXPECT_GT(gpu->peak_tflops.fp16, gpu->peak_tflops.fp32) << name << ": tensor cores beat fp32";
  }
  EXPECT_EQ(load_gpu("h100-80g")->memory_bytes, int64_t{81559} << 20);
  EXPECT_TRUE(load_gpu("rtx4090-24g").ok());
}

TEST(Hardware, AProfileWithAMissingFieldNamesIt) {
  auto gpu = parse_gpu_profile(R"({"name":"x","memory_bytes":1000,"cuda_context_bytes":0,"usable_memory_bytes":1000,
                                   "hbm_gbps":1,"nvlink_gbps":0,"peak_tflops":{"fp32":1,"tf32":1,"bf16":1,"fp16":1}})",
                               "x.json");
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.error().message.find("'pcie_gbps'"), std::string::npos) << gpu.error().message;
}

TEST(Hardware, UnknownNameListsTheKnownOnes) {
  auto gpu = load_gpu("tpu-v9");
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.error().message.find("h100-80g"), std::string::npos);
}

// A plan names a shipped GPU and carries any other (a --gpu file) whole, so
// that train, compare and export read it back without the file.
TEST(Hardware, AClusterCarriesAGpuThatIsNotShipped) {
  ClusterSpec shipped = make_cluster(load_gpu("h100-80g").value(), 8, 8, 400).value();
  EXPECT_EQ(cluster_to_json(shipped)["gpu"], "h100-80g");

  ClusterSpec custom = shipped;
  custom.gpu.name = "cpu-measured";
  custom.gpu.peak_tflops.fp32 = 0.0421;
  custom.gpu.nvlink_gbps = 3.5;
  custom.gpu.peak_tflops.fp8 = 1234.5;
  const nlohmann::json document = cluster_to_json(custom);
  ASSERT_TRUE(document["gpu"].is_object());
  auto read_back = parse_cluster(document.dump(), "plan.json");
  ASSERT_TRUE(read_back.ok()) << read_back.error().message;
  EXPECT_EQ(read_back->gpu.name, "cpu-measured");
  EXPECT_EQ(read_back->gpu.peak_tflops.fp32, 0.0421);
  EXPECT_EQ(read_back->gpu.nvlink_gbps, 3.5);
  EXPECT_EQ(read_back->gpu.peak_tflops.fp8, 1234.5);
  EXPECT_EQ(read_back->gpu.memory_bytes, shipped.gpu.memory_bytes);

  // A shipped name with other numbers is not the shipped GPU: carried whole too.
  ClusterSpec edited = shipped;
  edited.gpu.hbm_gbps = 1000;
  EXPECT_TRUE(cluster_to_json(edited)["gpu"].is_object());
}

}  // namespace
}  // namespace tessera::planner
