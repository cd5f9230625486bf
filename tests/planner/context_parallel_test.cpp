// --cp (context parallelism): the rank order, each rank's 1/cp of the
// activations, model states sharded over dp × cp, the ring's key/value
// exchange in the simulator, and the refusals, against figures worked by hand
// for Llama 2 7B (32 layers, h 4096, 32 heads, SwiGLU 11008).
#include <gtest/gtest.h>

#include "tessera/planner/activations.h"
#include "tessera/planner/cluster.h"
#include "tessera/planner/collectives.h"
#include "tessera/planner/context_parallel.h"
#include "tessera/planner/rank_groups.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

class ContextParallel : public ::testing::Test {
 protected:
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const Model llama = shipped_model("llama-2-7b");

  static EstimateRequest request(int64_t cp, int64_t seq) {
    EstimateRequest r;
    r.plugin.kind = PluginKind::hybrid_parallel;
    r.layout.cp = cp;
    r.training.seq_len = seq;
    return r;
  }
};

TEST(ContextParallelRanks, OrderTensorContextDataPipelineAsMegatron) {
  const ParallelLayout l{2, 2, 2, false, 2};  // dp 2 × tp 2 × pp 2 × cp 2 = 16 ranks
  ASSERT_EQ(l.world_size(), 16);
  // rank 5 = tp 1 + 2 · (cp 0 + 2 · (dp 1 + 2 · pp 0))
  const RankCoordinates c = rank_coordinates(l, 5);
  EXPECT_EQ(c.tp_rank, 1);
  EXPECT_EQ(c.cp_rank, 0);
  EXPECT_EQ(c.dp_rank, 1);
  EXPECT_EQ(c.pp_rank, 0);
  EXPECT_EQ(group_members(l, 5, MeshAxis::tensor), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(group_members(l, 5, MeshAxis::context), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(group_members(l, 5, MeshAxis::data), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(group_members(l, 5, MeshAxis::pipeline), (std::vector<int64_t>{5, 13}));
  EXPECT_EQ(group_index(l, 7, MeshAxis::context), group_index(l, 5, MeshAxis::context));
  // Without cp the order is the old tp-dp-pp one.
  EXPECT_EQ(group_members(ParallelLayout{2, 4, 2}, 6, MeshAxis::data), (std::vector<int64_t>{2, 6}));
}

// Gradients reduce over dp × cp (ParallelLayout::data_ranks()): the ranks of
// the same tp and pp rank, numbered cp fastest.
TEST(ContextParallelRanks, DataAndContextRanksReduceTogether) {
  const ParallelLayout l{2, 2, 2, false, 2};
  std::vector<int64_t> with_rank_5;
  for (int64_t r = 0; r < l.world_size(); ++r) {
    if (data_context_group_index(l, r) == data_context_group_index(l, 5)) with_rank_5.push_back(r);
  }
  EXPECT_EQ(with_rank_5, (std::vector<int64_t>{1, 3, 5, 7}));  // tp rank 1, pp rank 0
  EXPECT_EQ(data_context_group_index(l, 5), 1);
  EXPECT_EQ(data_context_group_index(l, 13), 3);  // tp rank 1, pp rank 1
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(data_context_rank(l, with_rank_5[static_cast<size_t>(i)]), i);
  // Without cp it is the data group.
  EXPECT_EQ(data_context_rank(ParallelLayout{2, 4, 2}, 6), 1);
}

// The load-balanced split (context_parallel.h's worked example and cp 4).
TEST(ContextParallelRanks, EachRankKeepsChunksRAndTwoCpMinusOneMinusR) {
  const auto positions = [](int64_t cp, int64_t rank, int64_t seq) {
    std::vector<int64_t> out;
    for (int64_t t = 0; t < seq / cp; ++t) out.push_back(ContextSplit{cp, rank}.global_position(t, seq / cp));
    return out;
  };
  EXPECT_EQ(positions(2, 0, 16), (std::vector<int64_t>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(positions(2, 1, 16), (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(positions(4, 1, 16), (std::vector<int64_t>{2, 3, 12, 13}));
  EXPECT_EQ(positions(1, 0, 4), (std::vector<int64_t>{0, 1, 2, 3}));
}

// The engine's ring attention buffers (tessera profile): two key-value blocks
// and two of their gradients (4 · kv_width each), one block's output (q_width)
// and its fp32 log-sum-exp per head, and in bf16 the fp32 running output
// (q_width), per local token; none without cp, and no running output in fp32.
TEST_F(ContextParallel, TheEngineProfileCountsTheRingBuffers) {
  const ActivationTable table = activation_table(llama.config, ActivationProfile::tessera, Precision::bf16);
  const int64_t tokens = 2 * 4096;  // micro-batch 2 of 4096 local tokens
  int64_t ring = 0, none = 0, tp2 = 0;
  for (const ActivationTerm& term : table.backward_scratch) {
    if (term.split != ActivationSplit::ring) continue;
    ring += term_bytes(term, ActivationShape{2, 4096, 1, false, 2});
    tp2 += term_bytes(term, ActivationShape{2, 4096, 2, false, 2});
    none += term_bytes(term, ActivationShape{2, 4096, 1, false, 1});
  }
  EXPECT_EQ(ring, tokens * (2 * (4 * 4096 + 4 * 4096 + 4096) + 4 * 32 + 4 * 4096));
  EXPECT_EQ(tp2, ring / 2);
  EXPECT_EQ(none, 0);
  int64_t fp32 = 0;
  for (const ActivationTerm& term : activation_table(llama.config, ActivationProfile::tessera, Precision::fp32).backward_scratch) {
    if (term.split == ActivationSplit::ring) fp32 += term_bytes(term, ActivationShape{2, 4096, 1, false, 2});
  }
  EXPECT_EQ(fp32, tokens * (4 * (4 * 4096 + 4 * 4096 + 4096) + 4 * 32));
}

TEST_F(ContextParallel, EachRankKeepsItsShareOfTheSequence) {
  // Flash profile, one Llama 2 7B block, bytes per token: bf16 norm inputs,
  // qkv/mlp inputs, q+k (8192), v, projection input (4096 each but q+k), SwiGLU's
  // gate and up (22016) and output (11008), plus the fp32 log-sum-exp of 32 heads:
  // 2 · (4096 · 6 + 8192) + 2 · 22016 + 2 · 11008 + 4 · 32 = 131,712.
  const EstimateRequest r = request(4, 8192);
  const ActivationTable table = activation_table(llama.config, ActivationProfile::flash, Precision::bf16);
  EXPECT_EQ(block_activation_bytes(table, activation_shape(r), RecomputeMode::none).stash, 2048 * 131'712);
  const RankMemory ring = estimate_or_fail(llama, h100, r).ranks.at(0);
  const RankMemory short_sequence = estimate_or_fail(llama, h100, request(1, 2048)).ranks.at(0);
  EXPECT_EQ(ring.bytes[Cat::activations].device, short_sequence.bytes[Cat::activations].device);
  EXPECT_EQ(ring.bytes[Cat::logits].device, short_sequence.bytes[Cat::logits].device);
}

TEST_F(ContextParallel, ModelStatesAreShardedOverDataAndContextRanks) {
  EstimateRequest r = request(4, 8192);
  r.layout.dp = 2;
  r.plugin.zero_stage = 1;
  const RankMemory row = estimate_or_fail(llama, h100, r).ranks.at(0);
  // 6,738,415,616 parameters over dp 2 × cp 4 = 8 ranks: 842,301,952 each.
  EXPECT_EQ(row.bytes[Cat::master_weights].device, 4 * 842'301'952LL);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 8 * 842'301'952LL);
  EXPECT_EQ(row.last_rank, 7);  // one stage: all 8 ranks
}

TEST_F(ContextParallel, TheRingHidesBehindAttention) {
  const EstimateRequest r = request(2, 8192);
  const ClusterSpec cluster = make_cluster(h100, 2, 8, 400).value();
  auto sim = simulate_step(llama, cluster, r, estimate_or_fail(llama, h100, r), SimulationSettings{}, true);
  ASSERT_TRUE(sim.ok()) << sim.error().message;
  // Per layer the keys and values of 4096 tokens × 4096 × 2 bytes each,
  // 67,108,864 bytes, go once round the 2-rank ring forward, as an all-gather of
  // both ranks' chunks does on NVLink (collectives.h), and backward again with
  // their gradients (a reduce-scatter). Under the layer's FlashAttention core
  // (half of 4 · 32 heads · 8192 · 4096.5 keys · 128 FLOPs, at 0.35 of 989.4
  // TFLOP/s: 0.32 ms forward) both hide: the step pays the overlap cost, 0.15
  // of it, for 32 layers.
  const CollectiveGroup ring{2, 1, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double gather = collective_seconds(Collective::all_gather, 2 * 67'108'864.0, ring);
  const double forward = 0.15 * 32 * gather;
  const double backward = 0.15 * 32 * (gather + collective_seconds(Collective::reduce_scatter, 2 * 67'108'864.0, ring));
  int found = 0;
  for (const TraceEvent& e : sim->events) {
    if (e.name == "context-parallel F0") {
      EXPECT_NEAR(e.duration_s, forward, forward * 1e-9);
      ++found;
    }
    if (e.name == "context-parallel B0") {
      EXPECT_NEAR(e.duration_s, backward, backward * 1e-9);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
  // Tokens per second count every sequence once: 8192 tokens a step.
  EXPECT_NEAR(sim->tokens_per_s * sim->step_time_s, 8192, 1e-6);
}

// Recomputing the attention core (selective) or the block (full) runs the
// forward ring again in backward; still hidden under the attention's own
// backward and rerun forward, so the step pays 0.15 of one more gather per
// layer. torchtitan's op-level policy keeps attention's output: no rerun.
TEST_F(ContextParallel, RecomputeRunsTheForwardRingAgainInBackward) {
  const ClusterSpec cluster = make_cluster(h100, 2, 8, 400).value();
  const CollectiveGroup ring{2, 1, cluster.intra_node_bytes_per_s(), cluster.inter_node_bytes_per_s(), true};
  const double gather = collective_seconds(Collective::all_gather, 2 * 67'108'864.0, ring);
  const double scatter = collective_seconds(Collective::reduce_scatter, 2 * 67'108'864.0, ring);
  for (const auto& [mode, gathers] : {std::pair{RecomputeMode::none, 1}, std::pair{RecomputeMode::selective, 2}, std::pair{RecomputeMode::full, 2}}) {
    EstimateRequest r = request(2, 8192);
    r.training.recompute = mode;
    auto sim = simulate_step(llama, cluster, r, estimate_or_fail(llama, h100, r), SimulationSettings{}, true);
    ASSERT_TRUE(sim.ok()) << sim.error().message;
    const double backward = 0.15 * 32 * (gathers * gather + scatter);
    int found = 0;
    for (const TraceEvent& e : sim->events) {
      if (e.name != "context-parallel B0") continue;
      EXPECT_NEAR(e.duration_s, backward, backward * 1e-9) << enum_name(mode);
      ++found;
    }
    EXPECT_EQ(found, 1) << enum_name(mode);
  }
  EXPECT_EQ(ring_sends(4, RecomputeMode::none).backward, 6);
  EXPECT_EQ(ring_sends(4, RecomputeMode::full).backward, 9);
  EXPECT_EQ(ring_sends(4, RecomputeMode::op_selective).backward, 6);
}

TEST_F(ContextParallel, RefusesWhatTheRuntimesCannotRun) {
  EstimateRequest odd = request(4, 8196);
  auto refused = estimate_memory(llama, h100, odd);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "--seq 8196 must be a multiple of 2 × --cp = 8 (each rank takes two balanced chunks of every sequence)");
  EstimateRequest ddp = request(2, 8192);
  ddp.plugin.kind = PluginKind::torch_ddp;
  ASSERT_FALSE(estimate_memory(llama, h100, ddp).ok());
  EXPECT_NE(estimate_memory(llama, h100, ddp).error().message.find("--cp 2 needs --plugin hybrid_parallel"), std::string::npos);
  EstimateRequest megatron = request(2, 8192);
  megatron.training.activation_profile = ActivationProfile::megatron;
  EXPECT_FALSE(estimate_memory(llama, h100, megatron).ok());
  EstimateRequest titan = request(2, 8192);
  titan.plugin.kind = PluginKind::torch_fsdp;
  titan.plugin.runtime = Runtime::torchtitan;
  EXPECT_TRUE(estimate_memory(llama, h100, titan).ok());
}

}  // namespace
}  // namespace tessera::planner
