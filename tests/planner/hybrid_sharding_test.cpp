// --dp-replicate (hybrid sharding): model states sharded over one replica's
// dp/R ranks, the gathers inside a replica, the refusals; GPT-2 small's
// 124,439,808 parameters give the byte figures by hand.
#include <gtest/gtest.h>

#include "tessera/planner/cluster.h"
#include "tessera/planner/collectives.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

constexpr int64_t kPsi = 124'439'808;

class HybridSharding : public ::testing::Test {
 protected:
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const Model gpt2 = shipped_model("gpt2");

  static EstimateRequest request(PluginKind plugin, int64_t dp, int64_t replicas) {
    EstimateRequest r;
    r.plugin.kind = plugin;
    r.layout.dp = dp;
    r.layout.dp_replicate = replicas;
    return r;
  }
};

TEST_F(HybridSharding, ZeroShardsOverOneReplica) {
  EstimateRequest r = request(PluginKind::low_level_zero, 8, 2);
  r.plugin.zero_stage = 2;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  const int64_t shard = kPsi / 4;  // 31,109,952: 8 ranks in 2 replicas of 4
  ASSERT_EQ(shard * 4, kPsi);
  EXPECT_EQ(row.bytes[Cat::parameters].device, 2 * kPsi);
  EXPECT_EQ(row.bytes[Cat::gradients].device, 2 * shard);
  EXPECT_EQ(row.bytes[Cat::master_weights].device, 4 * shard);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 8 * shard);
  EXPECT_EQ(row.last_rank, 7);
  // A communicator for the replicas besides the shard group's: one more NCCL buffer.
  r.layout.dp_replicate = 1;
  EXPECT_EQ(row.bytes[Cat::workspace].device - estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::workspace].device, int64_t{128} << 20);
}

TEST_F(HybridSharding, FsdpKeepsWhatFsdpOverOneReplicaKeeps) {
  const RankMemory hybrid = estimate_or_fail(gpt2, h100, request(PluginKind::torch_fsdp, 8, 2)).ranks.at(0);
  const RankMemory four = estimate_or_fail(gpt2, h100, request(PluginKind::torch_fsdp, 4, 1)).ranks.at(0);
  for (Cat c : {Cat::parameters, Cat::gradients, Cat::optimizer_states, Cat::chunk_buffers, Cat::comm_buffers}) {
    EXPECT_EQ(hybrid.bytes[c].device, four.bytes[c].device) << to_string(c);
  }
}

TEST_F(HybridSharding, RefusesWhatDoesNotShard) {
  auto odd = estimate_memory(gpt2, h100, request(PluginKind::torch_fsdp, 8, 3));
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.error().message, "--dp-replicate 3 does not divide --dp 8 (each replica shards over dp/R ranks); choose one of 1, 2, 4, 8");
  auto ddp = estimate_memory(gpt2, h100, request(PluginKind::torch_ddp, 8, 2));
  ASSERT_FALSE(ddp.ok());
  EXPECT_NE(ddp.error().message.find("torch_ddp keeps them whole on every rank"), std::string::npos);
  EXPECT_FALSE(estimate_memory(gpt2, h100, request(PluginKind::gemini, 8, 2)).ok());
  EXPECT_FALSE(estimate_memory(gpt2, h100, request(PluginKind::hybrid_parallel, 8, 2)).ok());  // ZeRO-0
}

TEST_F(HybridSharding, GathersStayInsideAReplica) {
  // 16 GPUs on 2 nodes; 2 replicas of 8 ranks each, one per node: ZeRO-3's
  // parameter gathers of GPT-2's 248,879,616 bf16 bytes run on NVLink, NCCL's
  // ring over the node's 8 ranks (collectives.h).
  const EstimateRequest r = request(PluginKind::torch_fsdp, 16, 2);
  const ClusterSpec cluster = make_cluster(h100, 16, 8, 400).value();
  auto sim = simulate_step(gpt2, cluster, r, estimate_or_fail(gpt2, h100, r), SimulationSettings{}, true);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  const CollectiveGroup replica{8, 1, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double gather = collective_seconds(Collective::all_gather, 2 * kPsi, replica);
  double pass = 0, comm = 0;
  for (const TraceEvent& e : sim->events) {
    if (e.name == "F0") pass = e.duration_s;
    if (e.name == "ZeRO-3 F0") comm = e.duration_s;
  }
  ASSERT_GT(comm, 0);
  const double compute = pass - comm;
  // What sticks out past the forward, 0.15 of what hides, and the first of 12 blocks' units unhidden.
  const double expected = std::max(0.0, gather - compute) + 0.15 * std::min(gather, compute) + gather / 12;
  EXPECT_NEAR(comm, expected, expected * 1e-9);
}

}  // namespace
}  // namespace tessera::planner
