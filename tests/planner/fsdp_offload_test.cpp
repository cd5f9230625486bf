// torch_fsdp with --cpu-offload (planner/fsdp_offload.h): where the memory
// model puts each shard, what the simulator charges for the copies and the
// CPU step, and what validation makes of it (exports: export_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "tessera/planner/fsdp_offload.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

EstimateRequest fsdp(int64_t dp, FsdpStrategy strategy, bool offload) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::torch_fsdp;
  r.plugin.fsdp_strategy = strategy;
  r.plugin.cpu_offload = offload;
  r.layout.dp = dp;
  r.training.precision = Precision::bf16;
  return r;
}

// Llama-2-7B on 8 ranks: every unit divides by 8, so a rank's shard is
// 6,738,415,616 / 8 = 842,301,952 elements, and the largest unit is the root
// (the embeddings and the head with its norm: 2 · 32,000 · 4,096 + 4,096 =
// 262,148,096 elements, a block 202,383,360), whose shard is 32,768,512.
TEST(FsdpOffload, ShardsLiveOnTheHostAndOneUnitsShardCrossesTheDevice) {
  const Model llama7b = shipped_model("llama-2-7b");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const int64_t shard = 842'301'952, root_shard = 32'768'512;
  ASSERT_EQ(llama7b.parameter_count, 8 * shard);
  ASSERT_EQ(llama7b.embedding.full() + llama7b.head.full(), 8 * root_shard);
  for (FsdpStrategy strategy : {FsdpStrategy::full_shard, FsdpStrategy::shard_grad_op}) {
    const RankMemory plain = estimate_or_fail(llama7b, h100, fsdp(8, strategy, false)).ranks.at(0);
    const RankMemory row = estimate_or_fail(llama7b, h100, fsdp(8, strategy, true)).ranks.at(0);
    // fp32, each unit's its own pinned tensor, held at a power of two
    // (pinned_host_blocks.h): the root's 131,074,048 bytes and each of the 32
    // blocks' 4 · 25,297,920 = 101,191,680 bytes take 2^27 each.
    const int64_t pinned = 33 * (int64_t{1} << 27);
    EXPECT_EQ(row.bytes[Cat::parameters].host, pinned);           // the optimizer's weights
    EXPECT_EQ(row.bytes[Cat::gradients].host, pinned);            // _cpu_grad
    EXPECT_EQ(row.bytes[Cat::optimizer_states].host, 8 * shard);  // AdamW's two fp32 states, pageable
    EXPECT_EQ(row.host_total, 2 * pinned + 8 * shard);
    EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 0);
    EXPECT_EQ(row.bytes[Cat::parameters].device, 4 * root_shard);  // the root's fp32 shard on its way up
    EXPECT_EQ(row.bytes[Cat::gradients].device, 4 * root_shard);   // and its reduced gradient shard on its way down
    // The gathered units and their unsharded gradients are FSDP's with or without offload.
    EXPECT_EQ(row.bytes[Cat::chunk_buffers].device, plain.bytes[Cat::chunk_buffers].device);
    EXPECT_EQ(row.bytes[Cat::comm_buffers].device, plain.bytes[Cat::comm_buffers].device);
    EXPECT_EQ(plain.host_total, 0);
  }
}

// FSDP2 (torchtitan) shards each parameter on dim 0: Llama-2-7B's rows all
// divide by 8, so the shard is again 842,301,952 elements; its units are
// smaller than FSDP1's root (the embeddings, and the norm with the head, are
// two), so its largest is a block: 4 · 4,096² + 3 · 4,096 · 11,008 + 2 · 4,096
// = 202,383,360 elements, 25,297,920 a rank. Each parameter's fp32 shard is
// its own pinned tensor, held at a power of two: a block's four attention
// shards 2^23 bytes each (exactly), its three MLP shards 22,544,384 bytes in
// 2^25 each, its two norms 2,048; the embeddings and the head 65,536,000
// bytes in 2^26 each, the final norm 2,048.
TEST(FsdpOffload, Fsdp2UnderTorchtitanOffloadsTheSameStates) {
  const Model llama7b = shipped_model("llama-2-7b");
  EstimateRequest r = fsdp(8, FsdpStrategy::full_shard, true);
  r.plugin.runtime = Runtime::torchtitan;
  r.training.num_micro_batches = 4;  // FSDP2 accumulates on the host
  const RankMemory row = estimate_or_fail(llama7b, shipped_gpu("h100-80g"), r).ranks.at(0);
  const int64_t block = 4 * (int64_t{1} << 23) + 3 * (int64_t{1} << 25) + 2 * 2'048;
  const int64_t pinned = 32 * block + 2 * (int64_t{1} << 26) + 2'048;
  EXPECT_EQ(pinned, 4'429'318'144);
  EXPECT_EQ(row.bytes[Cat::parameters].host, pinned);
  EXPECT_EQ(row.bytes[Cat::gradients].host, pinned);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, int64_t{8} * 842'301'952);  // pageable
  EXPECT_EQ(row.bytes[Cat::parameters].device, 4 * 25'297'920);
  EXPECT_EQ(row.bytes[Cat::gradients].device, 4 * 25'297'920);
}

TEST(FsdpOffload, ValidationAllowsBothStrategiesAndRefusesFsdp1Accumulation) {
  const Model gpt2 = shipped_model("gpt2");
  const GpuProfile h100 = shipped_gpu("h100-80g");
  for (FsdpStrategy strategy : {FsdpStrategy::full_shard, FsdpStrategy::shard_grad_op}) {
    EXPECT_TRUE(validate_request(gpt2, h100, fsdp(2, strategy, true)).ok());
  }
  EstimateRequest r = fsdp(2, FsdpStrategy::full_shard, true);
  r.training.num_micro_batches = 2;
  const Status s = validate_request(gpt2, h100, r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "--micro-batches 2: PyTorch FSDP keeps only the last micro-batch's gradient under --cpu-offload; use --micro-batches 1 "
                               "(a larger --micro-batch), or --runtime torchtitan (FSDP2)");
  r.plugin.kind = PluginKind::torch_ddp;
  r.training.num_micro_batches = 1;
  EXPECT_EQ(validate_request(gpt2, h100, r).error().message,
            "--cpu-offload applies to torch_fsdp, low_level_zero and hybrid_parallel with --zero-stage 1 or 2; for gemini use --placement");
}

// With nothing to hide under (overlap cost 0 and a PCIe link so slow that the
// copies outlast the passes), halving the link adds the copies' time once
// more: per micro-batch a rank's shard up for each gather (full_shard twice,
// shard_grad_op once) and down once, 4 bytes an element. With a link so fast
// that the copies hide, what is left is the CPU step: the shard at the node's
// CPU Adam rate shared by its 8 GPUs.
TEST(FsdpOffload, SimulatorChargesEachGathersCopyAndTheCpuStep) {
  const Model gpt2 = shipped_model("gpt2");
  SimulationSettings settings;
  settings.overlap_cost = 0;
  const auto offload_s = [&](FsdpStrategy strategy, double pcie_gbps) {
    GpuProfile gpu = shipped_gpu("h100-80g");
    gpu.pcie_gbps = pcie_gbps;
    const ClusterSpec cluster = make_cluster(gpu, 8, 8, 400).value();
    const EstimateRequest r = fsdp(8, strategy, true);
    auto sim = simulate_step(gpt2, cluster, r, estimate_or_fail(gpt2, gpu, r), settings, false);
    EXPECT_TRUE(sim.ok());
    return sim.value().breakdown.offload_s;
  };
  const double shard = static_cast<double>(gpt2.parameter_count) / 8, slow = 1e-3;  // GB/s
  EXPECT_NEAR(offload_s(FsdpStrategy::full_shard, slow / 2) - offload_s(FsdpStrategy::full_shard, slow), 3 * 4 * shard / (slow * 1e9), 1e-9);
  EXPECT_NEAR(offload_s(FsdpStrategy::shard_grad_op, slow / 2) - offload_s(FsdpStrategy::shard_grad_op, slow), 2 * 4 * shard / (slow * 1e9), 1e-9);
  const ClusterSpec node = make_cluster(shipped_gpu("h100-80g"), 8, 8, 400).value();
  EXPECT_NEAR(offload_s(FsdpStrategy::full_shard, 1e9), shard / (node.cpu_adam_params_per_s_per_node / 8), 1e-12);
}

}  // namespace
}  // namespace tessera::planner
