#include <gtest/gtest.h>

#include <algorithm>

#include <set>
#include <tuple>

#include <functional>

#include "tessera/planner/activations.h"
#include "tessera/planner/chunks.h"
#include "tessera/planner/gemini_static_placement.h"
#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/report.h"
#include "tessera/planner/sharding.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

using Cat = MemoryCategory;
using testing::estimate_or_fail;
using testing::shipped_gpu;
using testing::shipped_model;

class MemoryModel : public ::testing::Test {
 protected:
  const GpuProfile h100 = shipped_gpu("h100-80g");
  const Model gpt2 = shipped_model("gpt2");
  const Model llama7b = shipped_model("llama-2-7b");
  const int64_t psi = 124'439'808;
};

TEST_F(MemoryModel, DdpReplicatesEverythingAndCopiesGradientsIntoBuckets) {
  EstimateRequest r;
  r.training.precision = Precision::fp32;
  r.layout.dp = 2;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  EXPECT_EQ(row.bytes[Cat::parameters].device, 4 * psi);
  EXPECT_EQ(row.bytes[Cat::master_weights].device, 0);
  EXPECT_EQ(row.bytes[Cat::gradients].device, 4 * psi);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 8 * psi);
  EXPECT_EQ(row.bytes[Cat::comm_buffers].device, 4 * psi);
  r.plugin.gradient_as_bucket_view = true;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 0);
}

// Tessera's engine on GPUs (rank_order_reduction.h): the gradients are the
// buckets, and each bucket's all-reduce stages this rank's chunk from every
// rank. bf16, 25 MiB buckets of 13,107,200 elements: on 4 ranks 4 chunks of
// 3,276,800; on 3 ranks the largest chunk is 4,369,067, 3 copies of it.
TEST_F(MemoryModel, TheEnginesRankOrderReductionStagesOneBucket) {
  EstimateRequest r;
  r.plugin.gradient_as_bucket_view = true;
  r.plugin.rank_order_reduction = true;
  r.layout.dp = 4;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 26'214'400);
  r.layout.dp = 3;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 3 * 4'369'067 * 2);
  r.plugin.bucket_bytes = int64_t{1} << 30;  // a bucket larger than the model: the whole gradients, 3 chunks of 41,479,936
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 3 * 41'479'936 * 2);
  r.layout.dp = 1;  // one GPU reduces nothing
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 0);
}

// The engine's tensor parallelism on GPUs (hybrid_parallel, ZeRO stage 0)
// sums each tp rank's (b·s, h) partial sums in rank order as well: GPT-2 in
// bf16, micro-batch 8 × 1024 tokens × 768 over 2 tp ranks, 2 chunks of
// 3,145,728 elements; beside it the DDP bucket's scratch over the 2 dp ranks
// of the tp rank's part (62,641,920 parameters: smaller than the bucket, 2
// chunks of 13,107,200 of the 25 MiB bucket).
TEST_F(MemoryModel, TheEnginesTensorParallelSumsStageTheirRows) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.gradient_as_bucket_view = true;
  r.plugin.rank_order_reduction = true;
  r.training.precision = Precision::bf16;
  r.training.micro_batch_size = 8;
  r.training.seq_len = 1024;
  r.layout = ParallelLayout{1, 2, 1, false};
  const int64_t rows = 2 * 3'145'728 * 2;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, rows);
  r.layout.dp = 2;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, rows + 26'214'400);
  r.layout.sequence_parallel = true;  // the same sums as reduce-scatters: tp chunks of 4096 rows each
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, rows + 26'214'400);
  r.plugin.rank_order_reduction = false;  // PyTorch's NCCL all-reduces stage nothing of their own
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 0);
}

// At hybrid_parallel's ZeRO stage 1 or 2 the engine's data-parallel
// reduce-scatters stage their bucket's payload as well, but only after
// backward, never beside a tensor-parallel sum: the larger of the two
// scratches, beside the one bucket. GPT-2's tp part of 62,641,920 parameters
// on 2 dp ranks: the default bucket of 12,582,912 elements (25,165,824 bytes,
// more than the rows' 12,582,912), a small one of 1,000,000 (less), and at
// stage 2 the whole part (62,641,920 elements) as the bucket.
TEST_F(MemoryModel, TheEnginesHybridZeroStagesTheLargerOfItsScratches) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.zero_stage = 1;
  r.plugin.rank_order_reduction = true;
  r.training.precision = Precision::bf16;
  r.training.micro_batch_size = 8;
  r.training.seq_len = 1024;
  r.layout = ParallelLayout{2, 2, 1, false};
  const int64_t rows = 2 * 3'145'728 * 2, bucket = 12'582'912 * 2;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, bucket + bucket);
  r.plugin.reduce_bucket_numel = 1'000'000;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 2'000'000 + rows);
  r.plugin.zero_stage = 2;
  r.plugin.reduce_bucket_numel = int64_t{1} << 30;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 2 * 62'641'920 * 2);
  r.plugin.rank_order_reduction = false;  // the bucket alone
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 62'641'920 * 2);
  r.layout.dp = 1;  // nothing to reduce over dp: no bucket; the tensor-parallel sums' scratch alone
  r.plugin.rank_order_reduction = true;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, rows);
}

TEST_F(MemoryModel, ZeroStage2ShardsGradientsAndOptimizer) {
  EstimateRequest r;
  r.layout.dp = 4;
  r.plugin.kind = PluginKind::low_level_zero;
  r.plugin.zero_stage = 2;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  const int64_t shard = (psi + 3) / 4;
  EXPECT_EQ(row.bytes[Cat::parameters].device, 2 * psi);
  EXPECT_EQ(row.bytes[Cat::gradients].device, 2 * shard);
  EXPECT_EQ(row.bytes[Cat::master_weights].device, 4 * shard);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 8 * shard);
  // The 12 Mi-element reduce bucket is smaller than the model, so backward
  // fills it a layer at a time and it holds at least the largest layer's
  // gradients: the embeddings' (50257 + 1024) × 768 (sharding.h,
  // zero2_bucket_numel); two of them, one reduced while the other fills
  // (zero_reduce_buckets: DeepSpeed's overlap_comm double buffer).
  EXPECT_EQ(row.bytes[Cat::comm_buffers].device, 2 * 2 * (int64_t{50257} + 1024) * 768);
}

// Where backward reduces more than one bucket it keeps two (sharding.h,
// zero_reduce_buckets); where it reduces one, one.
TEST_F(MemoryModel, ZeroKeepsASecondBucketWhereReductionsOverlapBackward) {
  EstimateRequest r;
  r.layout.dp = 4;
  r.plugin.kind = PluginKind::low_level_zero;
  r.plugin.zero_stage = 1;
  // Stage 1: 12 Mi elements (12,582,912, a multiple of 4) take 3,145,728 of each 31,109,952-element shard at a time: ten pieces, two buckets.
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 2 * 2 * int64_t{12'582'912});
  const ZeroReduceBuckets stage1 = zero_reduce_buckets(gpt2.inventory, 1, r.plugin.reduce_bucket_numel, 4);
  EXPECT_EQ(stage1.numel, 12'582'912);
  EXPECT_TRUE(stage1.overlapped());
  // A bucket as large as the padded model: one piece, reduced after backward.
  r.plugin.reduce_bucket_numel = int64_t{1} << 30;
  EXPECT_EQ(estimate_or_fail(gpt2, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, 2 * padded_flat_numel(psi, 4));
  EXPECT_EQ(zero_reduce_buckets(gpt2.inventory, 1, r.plugin.reduce_bucket_numel, 4).count, 1);
  // Stage 2 with it: the full gradient buffer is the one bucket.
  const ZeroReduceBuckets whole = zero_reduce_buckets(gpt2.inventory, 2, r.plugin.reduce_bucket_numel, 4);
  EXPECT_TRUE(whole.whole_model);
  EXPECT_EQ(whole.total_numel(), padded_flat_numel(psi, 4));
}

TEST_F(MemoryModel, CpuOffloadMovesOptimizerToTheHost) {
  EstimateRequest r;
  r.layout.dp = 4;
  r.plugin.kind = PluginKind::low_level_zero;
  r.plugin.cpu_offload = true;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  const int64_t shard = (psi + 3) / 4;
  EXPECT_EQ(row.bytes[Cat::optimizer_states].device, 0);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, 8 * shard);
  EXPECT_EQ(row.bytes[Cat::master_weights].host, 4 * shard);
  EXPECT_EQ(row.bytes[Cat::gradients].host, 4 * shard);  // fp32 gradients for the CPU optimizer
  EXPECT_EQ(row.host_total, 16 * shard);
}

TEST_F(MemoryModel, FsdpFullShardGathersTwoBlocksAndTheRoot) {
  EstimateRequest r;
  r.layout.dp = 8;
  r.plugin.kind = PluginKind::torch_fsdp;
  const RankMemory full = estimate_or_fail(llama7b, h100, r).ranks.at(0);
  const int64_t root = llama7b.embedding.full() + llama7b.head.full();
  EXPECT_EQ(full.bytes[Cat::chunk_buffers].device, 2 * (root + 2 * llama7b.largest_block_numel));
  r.plugin.fsdp_strategy = FsdpStrategy::shard_grad_op;
  const RankMemory grad_op = estimate_or_fail(llama7b, h100, r).ranks.at(0);
  EXPECT_EQ(grad_op.bytes[Cat::chunk_buffers].device, 2 * llama7b.parameter_count);
}

// Tessera's GPU engine stages each unit's rank-order reduce-scatter (the
// whole unit, bf16) beside the root's and a block's gradients; on one rank
// nothing is reduced.
TEST_F(MemoryModel, FsdpRankOrderReductionStagesTheLargestUnit) {
  EstimateRequest r;
  r.layout.dp = 8;
  r.plugin.kind = PluginKind::torch_fsdp;
  r.training.precision = Precision::bf16;
  const int64_t plain = estimate_or_fail(llama7b, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device;
  r.plugin.rank_order_reduction = true;
  const int64_t staged = estimate_or_fail(llama7b, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device;
  const FsdpLayout units = fsdp_layout(llama7b.inventory, flat_parameter_order(llama7b.inventory), 8);
  EXPECT_EQ(staged - plain, 2 * std::max(units.root_padded, units.largest_block_padded));
  r.layout.dp = 1;
  const int64_t one = estimate_or_fail(llama7b, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device;
  r.plugin.rank_order_reduction = false;
  EXPECT_EQ(estimate_or_fail(llama7b, h100, r).ranks.at(0).bytes[Cat::comm_buffers].device, one);
}

TEST_F(MemoryModel, GeminiCpuPlacementKeepsOnlyGatheredChunksOnTheDevice) {
  EstimateRequest r;
  r.layout.dp = 8;
  r.plugin.kind = PluginKind::gemini;
  r.plugin.gemini.placement_policy = GeminiPlacement::cpu;
  r.plugin.pin_memory = false;  // the host holds the offloaded shards once, exactly (PinnedHostBlocks: with the pins)
  const MemoryEstimate e = estimate_or_fail(llama7b, h100, r);
  const RankMemory& row = e.ranks.at(0);
  const int64_t padded = e.gemini->padded_elements();
  EXPECT_EQ(row.bytes[Cat::parameters].device, 0);
  EXPECT_EQ(row.bytes[Cat::parameters].host, 2 * padded / 8);
  EXPECT_EQ(row.bytes[Cat::optimizer_states].host, 8 * padded / 8);
  // A block's five chunks ([q k] [v o] [gate] [up] [down, its norms]) are more than the head's own
  // 131,072,000-element chunk and the final norm's: in backward each is a whole
  // device buffer of 16-bit parameters and one of gradients.
  EXPECT_EQ(e.gemini->peak_gathered_chunks, 5);
  EXPECT_EQ(row.bytes[Cat::chunk_buffers].device, 5 * e.gemini->chunk_size * (2 + 2));
}

// ColossalAI's auto placement keeps every optimizer state on the host and
// evicts just enough parameter chunks, the leading ones (whose next use is
// farthest), to stay under 0.9 of the device: 13B on one H100 (26 GB of
// 16-bit parameters and as many gradients) must offload some.
TEST_F(MemoryModel, GeminiAutoOffloadsTheOptimizerAndJustEnoughParameters) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::gemini;
  r.plugin.gemini.placement_policy = GeminiPlacement::auto_placement;
  const MemoryEstimate small = estimate_or_fail(llama7b, h100, r);
  ASSERT_TRUE(small.gemini.has_value());
  EXPECT_EQ(small.gemini->offload_optim_frac, 1.0);
  EXPECT_EQ(small.gemini->offload_param_frac, 0.0);  // 7B's 16-bit chunks fit
  EXPECT_EQ(small.ranks[0].bytes[Cat::optimizer_states].device, 0);
  r.training.seq_len = 4096;
  const MemoryEstimate e = estimate_or_fail(shipped_model("llama-2-13b"), h100, r);
  EXPECT_GT(e.gemini->offload_param_frac, 0.0);
  EXPECT_LT(e.gemini->offload_param_frac, 1.0);
  const std::vector<bool>& host = e.gemini->parameters_on_host;
  const auto leading = std::find(host.begin(), host.end(), false) - host.begin();
  EXPECT_EQ(std::count(host.begin(), host.end(), true), leading);
  // Under the target, and not by more than the two chunks (16-bit parameters
  // and gradients) that the last one moved frees at rest and costs gathered.
  const double target = 0.9 * static_cast<double>(h100.memory_bytes);
  EXPECT_LE(static_cast<double>(e.ranks[0].device_total), target);
  EXPECT_GT(static_cast<double>(e.ranks[0].device_total), target - 2.0 * 4 * static_cast<double>(e.gemini->chunk_size));
}

// ColossalAI's static placement sends whole chunks, against a total that
// counts each chunk once per tensor in it. GPT-2 medium on 8 ranks: 292
// tensors in 7 chunks, the first wte's own (51,463,168 elements), then six
// of 51,432,448. offload_optim_frac 0.01 aims at 0.01 × (51,463,168 + 291 ×
// 51,432,448) = 150,183,055 elements: three chunks (154,328,064) pass it.
// 0.25 sends all seven.
TEST_F(MemoryModel, GeminiStaticOffloadsWholeChunksAsColossalAiCountsThem) {
  const Model medium = shipped_model("gpt2-medium");
  EstimateRequest r;
  r.layout.dp = 8;
  r.plugin.kind = PluginKind::gemini;
  r.plugin.gemini.offload_optim_frac = 0.01;
  r.plugin.pin_memory = false;  // the host holds only the offloaded chunks' states
  const MemoryEstimate e = estimate_or_fail(medium, h100, r);
  ASSERT_EQ(e.gemini->num_chunks, 7);
  EXPECT_EQ(e.gemini->optimizer_chunks_on_host, 3);
  const int64_t host_shard = (51463168 + 2 * 51432448) / 8;
  EXPECT_EQ(e.ranks[0].bytes[Cat::master_weights].host, 4 * host_shard);
  EXPECT_EQ(e.ranks[0].bytes[Cat::optimizer_states].host, 8 * host_shard);
  r.plugin.gemini.offload_optim_frac = 0.25;
  EXPECT_EQ(estimate_or_fail(medium, h100, r).gemini->optimizer_chunks_on_host, 7);

  const ChunkLayout layout = pack_chunks(medium.inventory, e.gemini->chunk_size, 8);
  for (int64_t chunks = 0; chunks <= layout.num_chunks(); ++chunks) {
    EXPECT_EQ(offloaded_optimizer_chunks(layout, offload_optim_frac_for(layout, chunks)), chunks) << chunks;
  }
  EXPECT_EQ(offloaded_optimizer_chunks(layout, 0.0), 0);
}

// offload_param_frac counts only with shard_param_frac 1 and offload_optim_frac 1 (ColossalAI warns and drops it otherwise).
TEST(GeminiStaticPlacement, ParameterOffloadNeedsEverythingShardedAndTheOptimizerOffloaded) {
  GeminiOptions g;
  g.offload_param_frac = 0.5;
  EXPECT_EQ(effective_offload_param_frac(g), 0.0);
  g.offload_optim_frac = 1;
  EXPECT_EQ(effective_offload_param_frac(g), 0.5);
  g.shard_param_frac = 0.5;
  EXPECT_EQ(effective_offload_param_frac(g), 0.0);
}

TEST(PipelineStages, RemainderGoesToTheMiddleStages) {
  auto stages = split_layers(12, 5);
  std::vector<int> counts;
  for (const StageLayers& s : stages) counts.push_back(s.num_layers);
  EXPECT_EQ(counts, (std::vector<int>{2, 3, 3, 2, 2}));
  EXPECT_EQ(stages[2].first_layer, 5);
  using V = std::vector<int64_t>;
  const V one{1};
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::one_f_one_b, 4, 0, 8, 1, one), V{4});
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::one_f_one_b, 4, 3, 8, 1, one), V{1});
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::gpipe, 4, 3, 8, 1, one), V{8});
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::one_f_one_b, 4, 0, 2, 1, one), V{2});
}

// Uneven pipelines as they ran: BLOOM-176B's 70 layers on 12 stages and
// Llama 3 405B's 126 on 16, the first and last stage one layer lighter.
TEST(PipelineStages, UnevenSplitsLightenTheFirstAndLastStage) {
  EXPECT_EQ(describe_layer_split(70, 12, 1), "5, 6 × 10, 5");
  EXPECT_EQ(describe_layer_split(126, 16, 1), "7, 8 × 14, 7");
  EXPECT_EQ(describe_layer_split(32, 4, 2), "8 × 4");
  EXPECT_EQ(split_layers(70, 12).back().first_layer, 65);
}

// The memory model books each stage's own blocks: BLOOM on 12 stages keeps
// 5 layers (and the embedding) on stage 0, 6 on stages 1-10, 5 and the head on
// stage 11; the fit is decided by the heaviest row.
TEST_F(MemoryModel, UnevenStagesHoldTheirOwnLayers) {
  const Model bloom = shipped_model("bloom-176b");
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.zero_stage = 1;
  r.layout = ParallelLayout{8, 4, 12, true};
  r.training.seq_len = 2048;
  r.training.num_micro_batches = 256;
  const MemoryEstimate e = estimate_or_fail(bloom, shipped_gpu("a100-80g"), r);
  ASSERT_EQ(e.ranks.size(), 12u);  // 1F1B: every stage holds a different number of micro-batches
  EXPECT_EQ(row_label(e.ranks[0]), "ranks 0-31 · stage 0 · layers 0-4 · embedding");
  EXPECT_EQ(row_label(e.ranks[1]), "ranks 32-63 · stage 1 · layers 5-10");
  EXPECT_EQ(row_label(e.ranks[11]), "ranks 352-383 · stage 11 · layers 65-69 · head");
  // Stages 0 and 1 hold 12 and 11 micro-batches: 5 × 12 against 6 × 11 blocks' activations.
  const ActivationTable table = activation_table(bloom.config, r.training.activation_profile, Precision::bf16);
  const int64_t block = block_activation_bytes(table, ActivationShape{1, 2048, 4, true}, RecomputeMode::none).stash;
  EXPECT_EQ(e.ranks[1].bytes[Cat::activations].device - e.ranks[0].bytes[Cat::activations].device, (6 * 11 - 5 * 12) * block);
  int64_t heaviest = 0;
  for (const RankMemory& row : e.ranks) heaviest = std::max(heaviest, row.device_total);
  EXPECT_EQ(e.tightest().device_total, heaviest);
}

// Interleaving (Narayanan et al. 2021, §2.2.2): stage k holds virtual stages
// k, k + pp, ...; stage 0 runs (pp - 1)·2 + (v - 1)·pp warm-up chunk forwards.
TEST(PipelineStages, InterleavedChunksAndWarmUp) {
  const auto chunks = stage_chunks(16, 4, 2);  // 8 virtual stages of 2 blocks
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0][0].first_layer, 0);
  EXPECT_EQ(chunks[0][1].first_layer, 8);
  EXPECT_EQ(chunks[3][0].first_layer, 6);
  EXPECT_EQ(chunks[3][1].first_layer, 14);
  using V = std::vector<int64_t>;
  // Stage 0, pp 4, v 2, m 8: 6 + 4 = 10 warm-up forwards and the first steady
  // one hold 11 chunk passes, Korthikanti's 4 · (1 + 3/8) = 5.5 micro-batches;
  // passes 0-10 run chunk 0 on micro-batches 0-3, chunk 1 on 0-3, chunk 0 on 4-6.
  // Then each step adds a chunk-0 pass and frees a chunk-1 one: weighting chunk
  // 0 more (it also holds the embedding's output) moves the peak to {8, 3}.
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, 4, 0, 8, 2, V{1, 1}), (V{7, 4}));
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, 4, 0, 8, 2, V{2, 1}), (V{8, 3}));
  // The last stage: (v - 1)·pp = 4 warm-up forwards, then the first steady one.
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, 4, 3, 8, 2, V{1, 1}), (V{4, 1}));
  // m = pp: ColossalAI keeps the warm-up formula, so later stages hold fewer.
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, 4, 0, 4, 2, V{1, 1}), (V{4, 4}));
  EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, 4, 3, 4, 2, V{1, 1}), (V{4, 1}));
  // Each stage's table runs every (micro-batch, chunk) forward and backward once.
  const auto table = pipeline_schedule(PipelineSchedule::interleaved, 4, 8, 2);
  for (const auto& ops : table) {
    ASSERT_EQ(ops.size(), 32u);
    std::set<std::tuple<int64_t, int64_t, int>> seen;
    for (const PipelineOp& op : ops) seen.insert({op.micro_batch, op.chunk, static_cast<int>(op.pass)});
    EXPECT_EQ(seen.size(), 32u);
  }
}

// in_flight_at_peak replays the warm-up and one period of the steady state; the
// whole table, replayed pass by pass, peaks at the same passes.
TEST(PipelineStages, InterleavedPeakMatchesTheWholeTable) {
  const auto replay = [](int64_t pp, int64_t stage, int64_t m, int64_t chunks, const std::vector<int64_t>& bytes_per_pass) {
    std::vector<int64_t> held(static_cast<size_t>(chunks), 0), peak = held;
    int64_t bytes = 0, peak_bytes = -1;
    for (const PipelineOp& op : stage_schedule(PipelineSchedule::interleaved, pp, stage, m, chunks)) {
      const int64_t change = op.pass == PipelinePass::forward ? 1 : -1;
      held[static_cast<size_t>(op.chunk)] += change;
      bytes += change * bytes_per_pass[static_cast<size_t>(op.chunk)];
      if (bytes > peak_bytes) {
        peak_bytes = bytes;
        peak = held;
      }
    }
    return peak;
  };
  for (int64_t pp : {2, 3, 4, 8}) {
    for (int64_t chunks : {2, 3, 5}) {
      std::vector<int64_t> weights;
      for (int64_t j = 0; j < chunks; ++j) weights.push_back((j * 7 + pp) % 4);  // uneven, some chunks weightless
      for (int64_t m = pp; m <= 6 * pp; m += pp) {
        for (int64_t stage = 0; stage < pp; ++stage) {
          for (const auto& bytes_per_pass : {std::vector<int64_t>(static_cast<size_t>(chunks), 1), weights}) {
            EXPECT_EQ(in_flight_at_peak(PipelineSchedule::interleaved, pp, stage, m, chunks, bytes_per_pass), replay(pp, stage, m, chunks, bytes_per_pass))
                << "pp " << pp << " stage " << stage << " m " << m << " chunks " << chunks;
          }
        }
      }
    }
  }
}

// Korthikanti et al. 2022, §4.2.3: under interleaving the first stage holds
// pp · (1 + (pp - 1) / (pp · v)) micro-batches of its layers' activations.
TEST_F(MemoryModel, InterleavedFirstStageHoldsTheFormulasActivations) {
  EstimateRequest one_f_one_b;
  one_f_one_b.plugin.kind = PluginKind::hybrid_parallel;
  one_f_one_b.layout = ParallelLayout{1, 1, 4, false};
  one_f_one_b.training.num_micro_batches = 8;
  EstimateRequest interleaved = one_f_one_b;
  interleaved.plugin.pp_schedule = PipelineSchedule::interleaved;
  interleaved.plugin.num_model_chunks = 2;
  const MemoryEstimate a = estimate_or_fail(llama7b, h100, one_f_one_b);
  const MemoryEstimate b = estimate_or_fail(llama7b, h100, interleaved);
  const ActivationTable table = activation_table(llama7b.config, one_f_one_b.training.activation_profile, Precision::bf16);
  const ActivationShape shape{1, 1024, 1, false};
  const int64_t block = block_activation_bytes(table, shape, RecomputeMode::none).stash;
  // 32 layers over 4 stages: 8 per stage, 4 per chunk. 1F1B: 4 micro-batches × 8 blocks;
  // interleaved: 11 chunk forwards × 4 blocks = 5.5 micro-batches = 4 · (1 + 3/8).
  const int64_t embedding = terms_bytes(table.first_stage, shape);
  EXPECT_EQ(a.ranks[0].bytes[Cat::activations].device - b.ranks[0].bytes[Cat::activations].device,
            (4 * 8 - 11 * 4) * block + (4 - 7) * embedding);
  EXPECT_EQ(b.ranks[0].in_flight_micro_batches, 11);
  EXPECT_EQ(b.ranks[0].layer_chunks.size(), 2u);
  EXPECT_EQ(row_label(b.ranks[0]), "rank 0 · stage 0 · layers 0-3, 16-19 · embedding");
}

// Interleaved, the first and last stages exchange with each other too (chunk j
// of the last feeds chunk j + 1 of the first): every stage has two neighbours,
// and rows are not merged, since each stage's blocks are ranges of its own.
TEST_F(MemoryModel, InterleavedStagesAllHaveTwoNeighboursAndTheirOwnRows) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout = ParallelLayout{1, 1, 8, false};
  r.training.num_micro_batches = 8;
  r.plugin.pp_schedule = PipelineSchedule::interleaved;
  r.plugin.num_model_chunks = 2;
  const MemoryEstimate e = estimate_or_fail(shipped_model("gpt2-medium"), h100, r);
  ASSERT_EQ(e.ranks.size(), 8u);
  for (const RankMemory& row : e.ranks) {
    EXPECT_EQ(row.layer_chunks.size(), 2u);
    EXPECT_EQ(row.bytes[Cat::comm_buffers].device, e.ranks[0].bytes[Cat::comm_buffers].device) << row_label(row);
  }
  EXPECT_EQ(row_label(e.ranks[4]), "rank 4 · stage 4 · layers 4-5, 20");  // 24 blocks over 16 virtual stages: 4-11 take two
}

TEST_F(MemoryModel, PipelineRanksDifferAndAreAllShown) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.layout = ParallelLayout{2, 2, 4, false};
  r.training.num_micro_batches = 8;
  r.training.seq_len = 4096;
  const MemoryEstimate e = estimate_or_fail(llama7b, h100, r);
  ASSERT_EQ(e.ranks.size(), 4u);  // 1F1B: every stage holds a different number of micro-batches
  EXPECT_TRUE(e.ranks[0].has_embedding);
  EXPECT_TRUE(e.ranks[3].has_head);
  EXPECT_EQ(e.ranks[0].in_flight_micro_batches, 4);
  EXPECT_EQ(e.ranks[3].in_flight_micro_batches, 1);
  EXPECT_EQ(e.ranks[0].bytes[Cat::logits].device, 0);
  EXPECT_GT(e.ranks[3].bytes[Cat::logits].device, 0);
  EXPECT_GT(e.ranks[0].bytes[Cat::activations].device, e.ranks[1].bytes[Cat::activations].device);
  EXPECT_EQ(e.ranks[1].first_rank, 4);
  EXPECT_EQ(e.ranks[1].last_rank, 7);
  // Logits: fp32, vocab split over tp = 2: 4096 tokens × 16000 × 4 bytes (Korthikanti's 4sbv, as the flash profile counts them).
  EXPECT_EQ(e.ranks[3].bytes[Cat::logits].device, 4096LL * 16000 * 4);
}

TEST_F(MemoryModel, IdenticalStagesShareOneRow) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.pp_schedule = PipelineSchedule::gpipe;
  r.layout.pp = 4;
  r.training.num_micro_batches = 4;
  const MemoryEstimate e = estimate_or_fail(shipped_model("gpt2-medium"), h100, r);
  ASSERT_EQ(e.ranks.size(), 3u);  // stage 0, stages 1-2, stage 3
  EXPECT_EQ(e.ranks[1].first_stage, 1);
  EXPECT_EQ(e.ranks[1].last_stage, 2);
}

TEST_F(MemoryModel, TiedEmbeddingIsCopiedToTheLastStage) {
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.training.precision = Precision::fp32;
  r.layout.pp = 2;
  r.training.num_micro_batches = 2;
  const MemoryEstimate e = estimate_or_fail(gpt2, h100, r);
  ASSERT_EQ(e.ranks.size(), 2u);
  int64_t blocks = 0;
  for (int i = 6; i < 12; ++i) blocks += gpt2.blocks[static_cast<size_t>(i)].full();
  EXPECT_EQ(e.ranks[1].bytes[Cat::parameters].device, 4 * (blocks + gpt2.head.full() + 50257LL * 768));
}

TEST_F(MemoryModel, MegatronActivationsMatchKorthikantiEndToEnd) {
  EstimateRequest r;
  r.training.activation_profile = ActivationProfile::megatron;
  r.training.micro_batch_size = 2;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  const int64_t s = 1024, b = 2, h = 768, a = 12, L = 12, V = 50257;
  const int64_t layers = L * (s * b * h * 34 + 5 * a * s * s * b);
  const int64_t outside = s * b * h /* embedding dropout mask */ + 4 * s * b * h /* final norm and head inputs */;
  EXPECT_EQ(row.bytes[Cat::activations].device, layers + outside);
  EXPECT_EQ(row.bytes[Cat::logits].device, 4 * s * b * V);
}

TEST_F(MemoryModel, RuntimeIsContextPlusReserveAndWorkspaceCountsCommunicators) {
  EstimateRequest r;
  r.layout.dp = 2;
  r.assumptions.cuda_context_bytes = 0;
  r.assumptions.allocator_reserve_fraction = 0.1;
  const RankMemory row = estimate_or_fail(gpt2, h100, r).ranks.at(0);
  EXPECT_EQ(row.bytes[Cat::workspace].device, (32 << 20) + (128 << 20));  // cuBLAS + one dp communicator
  const int64_t others = row.device_total - row.bytes[Cat::runtime].device;
  EXPECT_NEAR(static_cast<double>(row.bytes[Cat::runtime].device), 0.1 * static_cast<double>(others), 1.0);
}

TEST_F(MemoryModel, DoesNotFitReportsTheShortfall) {
  EstimateRequest r;  // 7B with DDP on one 80 GB GPU: 16 bytes per parameter alone exceed it
  const MemoryEstimate e = estimate_or_fail(llama7b, h100, r);
  EXPECT_FALSE(e.fits());
  EXPECT_LT(e.ranks[0].margin, 0);
  EXPECT_EQ(e.ranks[0].margin, h100.memory_bytes - e.ranks[0].device_total);
}

TEST_F(MemoryModel, ValidationNamesTheOption) {
  struct Case {
    std::function<void(EstimateRequest&)> change;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::hybrid_parallel; r.layout.tp = 5; }, "--tp 5 does not divide num_attention_heads 12"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::hybrid_parallel; r.layout.pp = 13; }, "--pp 13 exceeds the 12 layers"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::hybrid_parallel; r.layout.pp = 2; r.plugin.zero_stage = 2; }, "--zero-stage 2 cannot be combined with --pp 2"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::low_level_zero; r.plugin.zero_stage = 3; }, "--zero-stage 3"},
      {[](EstimateRequest& r) { r.training.micro_batch_size = 0; }, "--micro-batch must be a positive integer"},
      {[](EstimateRequest& r) { r.training.seq_len = -5; }, "--seq must be a positive integer"},
      {[](EstimateRequest& r) { r.training.seq_len = 2048; }, "exceeds the 1024 learned positions"},
      {[](EstimateRequest& r) { r.layout.tp = 2; }, "need --plugin hybrid_parallel"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::hybrid_parallel; r.layout.pp = 4; r.training.num_micro_batches = 2; },
       "--micro-batches 2 is below --pp 4: ColossalAI's 1F1B schedule needs a micro-batch per stage at least; use --micro-batches 4 or more"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::gemini; r.plugin.gemini.chunk_size = -8; }, "--chunk-size must be 0 (search) or a positive number"},
      {[](EstimateRequest& r) { r.plugin.kind = PluginKind::gemini; r.plugin.gemini.offload_optim_frac = 1.5; }, "--offload-optim-frac must lie in [0, 1]"},
  };
  for (const Case& c : cases) {
    EstimateRequest r;
    c.change(r);
    auto e = estimate_memory(gpt2, h100, r);
    ASSERT_FALSE(e.ok()) << c.mentions;
    EXPECT_NE(e.error().message.find(c.mentions), std::string::npos) << e.error().message;
  }
}

TEST_F(MemoryModel, Bf16OnVoltaIsRejected) {
  EstimateRequest r;
  auto e = estimate_memory(gpt2, shipped_gpu("v100-32g"), r);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("--precision fp16"), std::string::npos);
}

}  // namespace
}  // namespace tessera::planner
