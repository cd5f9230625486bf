// --precision fp8 (fp8.h): Transformer Engine's extra state, its FP8
// activations, the GEMMs at the FP8 peak and MFU on the bf16 peak, each
// against figures worked by hand for GPT-2 small (12 blocks, h 768, MLP 3072).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tessera/planner/cluster.h"
#include "tessera/planner/collectives.h"
#include "tessera/planner/fp8.h"
#include "tessera/planner/gemm_model.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

// One block's GEMM weights: c_attn 768 × 2304, attn c_proj 768 × 768, c_fc 768 × 3072, mlp c_proj 3072 × 768.
constexpr int64_t kBlockGemmWeights = 1'769'472 + 589'824 + 2'359'296 + 2'359'296;  // 7,077,888

class Fp8 : public ::testing::Test {
 protected:
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const Model gpt2 = shipped_model("gpt2");

  // Megatron-Core's data parallelism: the runtime whose FP8 the planner models (validate_runtime.cpp).
  static EstimateRequest request(Precision precision) {
    EstimateRequest r;
    r.plugin.kind = PluginKind::hybrid_parallel;
    r.plugin.runtime = Runtime::megatron;
    r.training.precision = precision;
    r.training.seq_len = 1024;
    return r;
  }
};

TEST_F(Fp8, KeepsTheWeightCopiesTransposesAndScalingStateOfEveryBlock) {
  ASSERT_EQ(gpt2.blocks.at(0).matmul_weights, kBlockGemmWeights);
  // 4 GEMMs × 5 scaled tensors × (1024 amax rows + scale + scale_inv) × 4 bytes.
  EXPECT_EQ(fp8_scaling_bytes_per_block(), 82'080);
  const RankMemory bf16 = estimate_or_fail(gpt2, h100, request(Precision::bf16)).ranks.at(0);
  const RankMemory fp8 = estimate_or_fail(gpt2, h100, request(Precision::fp8)).ranks.at(0);
  // 12 blocks × (2 bytes × 7,077,888 + 82,080) = 169,869,312 + 984,960.
  EXPECT_EQ(fp8.bytes[Cat::parameters].device - bf16.bytes[Cat::parameters].device, 170'854'272);
  for (Cat c : {Cat::master_weights, Cat::gradients, Cat::optimizer_states}) EXPECT_EQ(fp8.bytes[c].device, bf16.bytes[c].device);
}

TEST_F(Fp8, TheCopiesAreTensorParallelShards) {
  EstimateRequest r = request(Precision::fp8);
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout.tp = 4;
  EstimateRequest b = r;
  b.training.precision = Precision::bf16;
  const int64_t extra = estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::parameters].device -
                        estimate_or_fail(gpt2, h100, b).ranks.at(0).bytes[Cat::parameters].device;
  EXPECT_EQ(extra, 12 * (2 * kBlockGemmWeights / 4 + 82'080));
}

// --fp8-param-gather: the weights are FP8 tensors (a byte, and a byte for the
// transpose TE caches), so nothing but the scaling state is added to bf16's.
TEST_F(Fp8, ParamGatherKeepsTheWeightsInFp8WithoutCopies) {
  EstimateRequest r = request(Precision::fp8);
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.runtime = Runtime::megatron;
  r.plugin.zero_stage = 1;
  r.layout.dp = 2;
  EstimateRequest b = r;
  b.training.precision = Precision::bf16;
  const int64_t bf16_params = estimate_or_fail(gpt2, h100, b).ranks.at(0).bytes[Cat::parameters].device;
  const int64_t copies = estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::parameters].device - bf16_params;
  r.plugin.fp8_param_gather = true;
  const int64_t gathered = estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::parameters].device - bf16_params;
  EXPECT_EQ(copies, 12 * (2 * kBlockGemmWeights + 82'080));
  EXPECT_EQ(gathered, 12 * 82'080);
  const std::string needs = "--fp8-param-gather keeps Transformer Engine's weights in FP8 and all-gathers them so (Megatron-LM): it needs "
                            "--runtime megatron, --precision fp8 and the distributed optimizer (--zero-stage 1)";
  EstimateRequest without_optimizer = r;
  without_optimizer.plugin.zero_stage = 0;
  EstimateRequest in_bf16 = r;
  in_bf16.training.precision = Precision::bf16;
  for (const EstimateRequest& refused : {without_optimizer, in_bf16}) {
    auto e = estimate_memory(gpt2, h100, refused);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message, needs);
  }
}

TEST_F(Fp8, SavesTheFourGemmInputsInOneByte) {
  const RankMemory bf16 = estimate_or_fail(gpt2, h100, request(Precision::bf16)).ranks.at(0);
  const RankMemory fp8 = estimate_or_fail(gpt2, h100, request(Precision::fp8)).ranks.at(0);
  // qkv input 768, projection input 768, fc1 input 768, fc2 input 3072: a byte
  // less per element, 1024 tokens, 12 blocks.
  EXPECT_EQ(bf16.bytes[Cat::activations].device - fp8.bytes[Cat::activations].device, 1024 * 5376 * 12);
  EXPECT_EQ(fp8.bytes[Cat::logits].device, bf16.bytes[Cat::logits].device);  // the head stays bf16
}

TEST_F(Fp8, AGpuWithoutFp8TensorCoresRefusesIt) {
  auto v100 = estimate_memory(gpt2, shipped_gpu("v100-32g"), request(Precision::fp8));
  ASSERT_FALSE(v100.ok());
  EXPECT_EQ(v100.error().message, "--precision fp8 is not supported by v100-32g (no FP8 tensor cores: Ada or Hopper and later); use --precision fp16");
  auto a100 = estimate_memory(gpt2, shipped_gpu("a100-80g"), request(Precision::fp8));
  ASSERT_FALSE(a100.ok());
  EXPECT_NE(a100.error().message.find("use --precision bf16"), std::string::npos);
  for (const char* name : {"h100-80g", "h200-141g", "l40s-48g", "rtx4090-24g"}) EXPECT_GT(shipped_gpu(name).peak_tflops.fp8, 0) << name;
  EstimateRequest hf = request(Precision::fp8);
  hf.training.activation_profile = ActivationProfile::hf;
  EXPECT_FALSE(estimate_memory(gpt2, h100, hf).ok());
}

TEST_F(Fp8, TheProfileCarriesTheFp8PeakThroughJson) {
  auto back = parse_gpu_profile(gpu_profile_to_json(h100), "printed");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->peak_tflops.fp8, 1978.9);
  EXPECT_EQ(nlohmann::json::parse(gpu_profile_to_json(h100))["peak_tflops"]["fp8"], 1978.9);
  // A profile without the key (a GPU without FP8) reads as 0.
  auto old = parse_gpu_profile(R"({"name":"x","memory_bytes":1000,"cuda_context_bytes":0,"usable_memory_bytes":1000,"hbm_gbps":1,
                                   "nvlink_gbps":0,"pcie_gbps":1,"peak_tflops":{"fp32":1,"tf32":1,"bf16":1,"fp16":1}})",
                               "x.json");
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_EQ(old->peak_tflops.fp8, 0);
}

class Fp8Step : public Fp8 {
 protected:
  StepSimulation simulate(const GpuProfile& gpu, Precision precision) {
    const EstimateRequest r = request(precision);
    const ClusterSpec cluster = make_cluster(gpu, 1, 8, 400).value();
    auto sim = simulate_step(gpt2, cluster, r, estimate_or_fail(gpt2, gpu, r), SimulationSettings{}, false);
    EXPECT_TRUE(sim.ok()) << sim.error().message;
    return sim.value();
  }
};

TEST_F(Fp8Step, TheBlocksGemmsRunAtTheFp8Peak) {
  GpuProfile gpu = h100;
  gpu.hbm_gbps = 1e12;  // memory-bound work vanishes: the GEMMs alone
  gpu.peak_tflops.fp8 = 2 * gpu.peak_tflops.bf16;
  gpu.matmul_efficiency_fp8 = 0;  // no FP8 measurement: the forward at bf16's fraction of the peak
  // A block's 4 forward GEMMs on 1024 tokens (k = 768, 768, 768, 3072) each fit one
  // wave of 256×128 tiles on the 132 SMs (gemm_model.h): a wave is one tile's
  // 2 · 256 · 128 · k FLOPs on one SM at 0.803 · 0.85 of the peak. At twice the
  // bf16 peak the 12 blocks save half their bf16 time.
  const double wave_flops = 2.0 * 256 * 128 * (768 * 3 + 3072);
  const double saved = 12 * wave_flops / (989.4e12 * 0.803 * 0.85 / 132) / 2;
  EXPECT_NEAR(simulate(gpu, Precision::bf16).breakdown.forward_s - simulate(gpu, Precision::fp8).breakdown.forward_s, saved, saved * 1e-6);  // what HBM at 10^21 B/s still costs
}

TEST_F(Fp8Step, TheBackwardGemmsRunTheSplitAccumulator) {
  GpuProfile gpu = h100;
  gpu.hbm_gbps = 1e12;                            // no memory-bound work: casts and saved tensors cost nothing
  gpu.peak_tflops.fp8 = gpu.peak_tflops.bf16;  // equal peaks: only the accumulator differs
  gpu.matmul_efficiency_fp8 = 0;                // and equal fractions of them
  // Transformer Engine's input- and weight-gradient GEMMs promote their sums to
  // FP32 (_2X_ACC_DGRAD/_2X_ACC_WGRAD), 1.15 times as slow; its forward GEMMs do not.
  const KernelRoofs bf16 = kernel_roofs(gpu, Precision::bf16, SimulationSettings{}.memory_efficiency);
  const std::vector<PassSeconds> gemms = matmul_seconds_by_layer(gpt2, 1024, 1, bf16, {bf16, bf16});
  double block_backward = 0;
  for (int64_t layer = 1; layer <= 12; ++layer) block_backward += gemms.at(static_cast<size_t>(layer)).backward;
  const StepSimulation with_bf16 = simulate(gpu, Precision::bf16), with_fp8 = simulate(gpu, Precision::fp8);
  EXPECT_NEAR(with_fp8.breakdown.forward_s, with_bf16.breakdown.forward_s, with_bf16.breakdown.forward_s * 1e-9);
  EXPECT_NEAR(with_fp8.breakdown.backward_s - with_bf16.breakdown.backward_s, 0.15 * block_backward, block_backward * 1e-9);
}

TEST_F(Fp8Step, TheMeasuredFp8FractionIsTheSplitAccumulators) {
  // The H100's FP8 MAMF, 70.9% of 1,978.9 TFLOP/s, was measured through
  // torch._scaled_mm's default split accumulator: the backward's; the forward's
  // fast accumulation is 1.15 times as fast. Both at 0.85 of it for ordinary shapes.
  EXPECT_EQ(h100.matmul_efficiency_fp8, 0.709);
  const BlockGemmRoofs roofs = block_gemm_roofs(h100, Precision::fp8, 0.8);
  EXPECT_DOUBLE_EQ(roofs.backward.matmul_flops, 1978.9e12 * 0.709 * 0.85);
  EXPECT_DOUBLE_EQ(roofs.forward.matmul_flops, 1978.9e12 * 0.709 * 0.85 * 1.15);
  EXPECT_EQ(roofs.forward.peak_flops, 1978.9e12);
  // Neither depends on bf16's fraction.
  GpuProfile slower_bf16 = h100;
  slower_bf16.matmul_efficiency = 0.5;
  EXPECT_DOUBLE_EQ(block_gemm_roofs(slower_bf16, Precision::fp8, 0.8).forward.matmul_flops, roofs.forward.matmul_flops);
  // The profile carries it through JSON.
  auto back = parse_gpu_profile(gpu_profile_to_json(h100), "printed");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->matmul_efficiency_fp8, 0.709);
}

TEST_F(Fp8Step, TheCastsCostTheirHbmTraffic) {
  GpuProfile gpu = h100;
  gpu.peak_tflops.fp8 = gpu.peak_tflops.bf16;  // equal peaks and forward roofs: only the memory-bound work differs
  gpu.matmul_efficiency_fp8 = 0;
  // Forward: the 4 GEMM inputs (5376 elements a token) cast with their transposes, 4 bytes
  // each, 1024 tokens × 12 blocks; the saved activations are 5376 bytes a token and block lighter.
  const double bytes = 1024.0 * 12 * 5376 * 4 - 1024.0 * 12 * 5376;
  const double seconds = bytes / (3350e9 * 0.8);
  EXPECT_NEAR(simulate(gpu, Precision::fp8).breakdown.forward_s - simulate(gpu, Precision::bf16).breakdown.forward_s, seconds, seconds * 1e-9);
}

TEST_F(Fp8Step, EachPassReducesItsAmaxesOverTheDataParallelGroup) {
  // 16 ranks of dp on 2 nodes: each forward ends with an all-reduce of the 12
  // blocks' forward amaxes (4 GEMMs × 3 × 4 bytes), each backward with one of
  // the backward ones (4 × 2 × 4), latency-bound: NCCL's tree with LL,
  // 6.8 µs + 2 × (7 NVLink hops × 0.6 + 1 network hop × 5.0) = 25.2 µs and the bytes (collectives.h).
  EstimateRequest r = request(Precision::fp8);
  r.layout.dp = 16;
  const ClusterSpec cluster = make_cluster(h100, 16, 8, 400).value();
  const CollectiveGroup group{16, 2, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  EXPECT_EQ(fp8_amax_reduction_bytes(12, true), 576);
  EXPECT_EQ(fp8_amax_reduction_bytes(12, false), 384);
  const double forward = collective_seconds(Collective::all_reduce, 576, group), backward = collective_seconds(Collective::all_reduce, 384, group);
  EXPECT_NEAR(forward, 25.2e-6, 0.5e-6);
  const auto exposed = [&](Precision precision, const std::string& name) {
    r.training.precision = precision;
    auto sim = simulate_step(gpt2, cluster, r, estimate_or_fail(gpt2, h100, r), SimulationSettings{}, true);
    EXPECT_TRUE(sim.ok()) << sim.error().message;
    for (const TraceEvent& e : sim->events) {
      if (e.name == name) return e.duration_s;
    }
    return 0.0;
  };
  EXPECT_NEAR(exposed(Precision::fp8, "FP8 amax reduction F0"), forward, forward * 1e-9);
  EXPECT_NEAR(exposed(Precision::fp8, "FP8 amax reduction B0"), backward, backward * 1e-9);
  EXPECT_EQ(exposed(Precision::bf16, "data-parallel F0"), 0.0);  // bf16 reduces no amaxes
}

TEST_F(Fp8Step, MfuIsStatedOnTheBf16Peak) {
  const StepSimulation sim = simulate(h100, Precision::fp8);
  EXPECT_NEAR(sim.mfu, sim.model_tflops_per_gpu / 989.4, 1e-12);
}

}  // namespace
}  // namespace tessera::planner
