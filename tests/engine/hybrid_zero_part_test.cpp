// hybrid_parallel's ZeRO on GPUs as host logic, checked on the CPU: each
// rank's shard is of its tensor-parallel part (planner::tp_rank_model) over
// the data-parallel ranks, the buffers the GPU step allocates for it
// (cuda/zero_shards.h: zero_buffers and the optimizer layout's shard) are the
// planner's estimate of the same tp × dp run category by category, the
// ranges of a shard its gradient norm counts (gradient_norm_runs) count every
// parameter of the group once, and which ZeRO stages the GPU step takes
// (device/gpu_plugins.h). GPT-2 over tp 3 and the Llama layout over tp 2
// (awkward_models.h), on 2 and 3 data-parallel ranks; and ZeRO-1 in a
// pipeline: each stage's shard is of its stage's part. With --cpu-offload
// (cuda/zero_offload.h) the shard's master weights, states and fp32 gradient
// shard are the planner's host bytes, and the host norm of the offloaded
// shards (Optimizer::counted_sum_of_squares) counts what the device norm's
// runs count, in every stage of a pipeline.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "awkward_models.h"
#include "tessera/engine/device/gpu_plugins.h"
#include "tessera/engine/device/tensor_parallel_part.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/parallel/zero_buckets.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/optimizer_layout.h"
#include "tessera/planner/pipeline_stage_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/sharding.h"
#include "tessera/planner/tensor_parallel.h"

namespace tessera::engine {
namespace {

const std::pair<const char*, int64_t> kCases[] = {{testing::kAwkwardGpt2, 3}, {testing::kAwkwardLlama, 2}};

planner::PluginOptions hybrid(int stage, int64_t reduce_bucket_numel) {
  planner::PluginOptions plugin;
  plugin.kind = planner::PluginKind::hybrid_parallel;
  plugin.zero_stage = stage;
  plugin.reduce_bucket_numel = reduce_bucket_numel;
  return plugin;
}

// Stage 1 through a bucket smaller than a shard (several pieces, still one
// bucket: reduced after backward), stage 1 and 2 through the whole part.
const std::pair<int, int64_t> kStages[] = {{1, 3000}, {1, int64_t{1} << 30}, {2, int64_t{1} << 30}};

TEST(HybridZeroPart, BuffersAreThePlannersEstimate) {
  auto gpu = planner::load_gpu("h100-80g");
  ASSERT_TRUE(gpu.ok());
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = testing::awkward_model(json), part = planner::tp_rank_model(whole, tp);
    for (const int64_t dp : {2, 3}) {
      for (const auto& [stage, bucket] : kStages) {
        planner::EstimateRequest request;
        request.layout.dp = dp;
        request.layout.tp = tp;
        request.plugin = hybrid(stage, bucket);
        request.training.precision = planner::Precision::bf16;
        request.training.micro_batch_size = 1;
        request.training.seq_len = 8;
        auto estimate = planner::estimate_memory(whole, gpu.value(), request);
        ASSERT_TRUE(estimate.ok()) << estimate.error().message;
        const planner::RankMemory& row = estimate->ranks.at(0);
        const ZeroBuffers b = zero_buffers(part, request.plugin, dp);
        const int64_t shard = planner::optimizer_layout(part, request.plugin, dp, dp - 1).shard_numel;
        const bool full_is_bucket = b.full_gradients_category == MemoryCategory::comm_buffers;
        const std::string what = whole.config.model_type + " tp " + std::to_string(tp) + " × dp " + std::to_string(dp) + ", stage " + std::to_string(stage) +
                                 ", bucket " + std::to_string(bucket);
        EXPECT_EQ(shard, planner::shard_numel(part.parameter_count, dp)) << what << ": the shard is of the rank's part";
        EXPECT_EQ(row.bytes[MemoryCategory::parameters].device, 2 * b.parameters) << what;
        EXPECT_EQ(row.bytes[MemoryCategory::gradients].device, 2 * ((full_is_bucket ? 0 : b.full_gradients) + b.gradient_shard)) << what;
        EXPECT_EQ(row.bytes[MemoryCategory::comm_buffers].device, 2 * ((full_is_bucket ? b.full_gradients : 0) + b.buckets_numel())) << what;
        EXPECT_EQ(row.bytes[MemoryCategory::master_weights].device, 4 * shard) << what;
        EXPECT_EQ(row.bytes[MemoryCategory::optimizer_states].device, 2 * 4 * shard) << what;
        EXPECT_EQ(b.bucket_count, stage == 1 ? 1 : 0) << what << ": one bucket, reduced after backward (none started in it)";
        EXPECT_EQ(full_is_bucket, stage == 2) << what << ": stage 2 reduce-scatters the full buffer once";
        // Offloaded: the device keeps the same 16-bit buffers; the host the
        // CPU optimizer's master weights and two states and the pinned fp32
        // gradient shard it reads (zero_offload.h), each of the part's shard.
        request.plugin.cpu_offload = true;
        auto offloaded = planner::estimate_memory(whole, gpu.value(), request);
        ASSERT_TRUE(offloaded.ok()) << offloaded.error().message;
        const planner::RankMemory& host_row = offloaded->ranks.at(0);
        for (const MemoryCategory category : {MemoryCategory::parameters, MemoryCategory::gradients, MemoryCategory::comm_buffers}) {
          EXPECT_EQ(host_row.bytes[category].device, row.bytes[category].device) << what << ", offloaded: " << to_string(category);
        }
        EXPECT_EQ(host_row.bytes[MemoryCategory::master_weights].device + host_row.bytes[MemoryCategory::optimizer_states].device, 0) << what;
        EXPECT_EQ(host_row.bytes[MemoryCategory::master_weights].host, 4 * shard) << what;
        EXPECT_EQ(host_row.bytes[MemoryCategory::optimizer_states].host, 2 * 4 * shard) << what;
        EXPECT_EQ(host_row.bytes[MemoryCategory::gradients].host, 4 * shard) << what;
      }
    }
  }
}

// The offloaded norm: over the dp ranks' shards of each tp rank's part of
// each pipeline stage, the host sums of the counted pieces (small integers:
// exact in double) add up to the device norm's runs over the whole part
// (gradient_norm_runs), so that both steps count every parameter once, a
// replicated one on tp rank 0 and a tied embedding on the first stage only.
TEST(HybridZeroPart, OffloadedNormCountsWhatTheDeviceNormCounts) {
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = testing::awkward_model(json);
    for (const int64_t pp : {1, 2}) {
      for (int64_t s = 0; s < pp; ++s) {
        const planner::Model part = planner::tp_rank_model(planner::stage_model(whole, planner::PipelinePlacement{pp, s, 1}), tp);
        const int64_t n = part.parameter_count;
        for (const int64_t dp : {2, 3}) {
          const planner::PluginOptions plugin = hybrid(1, 3000);
          const int64_t shard = planner::shard_numel(n, dp);
          std::vector<float> gradients(static_cast<size_t>(dp * shard), 0.0f);  // the part's flat order, padded
          for (int64_t i = 0; i < n; ++i) gradients[static_cast<size_t>(i)] = static_cast<float>(i % 7 + 1);
          for (int64_t tp_rank = 0; tp_rank < tp; ++tp_rank) {
            const std::vector<bool> counted = planner::counted_in_gradient_norm(part, tp_rank);
            double host = 0;
            for (int64_t r = 0; r < dp; ++r) {
              const planner::OptimizerLayout layout = planner::optimizer_layout(part, plugin, dp, r);
              MemoryLedger ledger;
              std::vector<bf16> parameters(static_cast<size_t>(shard));
              const Optimizer<bf16> optimizer(ledger, parameters.data(), shard, layout.pieces, std::vector<bool>(counted.size(), false), OptimizerOptions{},
                                              MemorySpace::host);
              host += optimizer.counted_sum_of_squares(gradients.data() + r * shard, counted, 1.0);
            }
            double device = 0;
            for (const auto& [begin, end] : gradient_norm_runs(part, tp_rank)) {
              for (int64_t i = begin; i < end; ++i) device += static_cast<double>(gradients[static_cast<size_t>(i)]) * gradients[static_cast<size_t>(i)];
            }
            EXPECT_EQ(host, device) << whole.config.model_type << " tp rank " << tp_rank << " of " << tp << ", stage " << s << " of " << pp << ", dp " << dp;
          }
        }
      }
    }
  }
}

// The shards' counted ranges, put back at each shard's place in the part's
// flat order, are the part's counted ranges: over the data-parallel ranks
// every counted element once, and over the tensor-parallel ranks a
// replicated parameter on tp rank 0 only.
TEST(HybridZeroPart, ShardNormRunsCountEveryParameterOnce) {
  for (const auto& [json, tp] : kCases) {
    const planner::Model whole = testing::awkward_model(json), part = planner::tp_rank_model(whole, tp);
    for (const int64_t dp : {2, 3}) {
      const planner::PluginOptions plugin = hybrid(1, 3000);
      const int64_t shard = planner::shard_numel(part.parameter_count, dp);
      for (int64_t tp_rank = 0; tp_rank < tp; ++tp_rank) {
        std::vector<std::pair<int64_t, int64_t>> joined;
        for (int64_t r = 0; r < dp; ++r) {
          for (const auto& [begin, end] : gradient_norm_runs(part, tp_rank, planner::optimizer_layout(part, plugin, dp, r).pieces)) {
            ASSERT_TRUE(begin < end && end <= shard);
            if (!joined.empty() && joined.back().second == r * shard + begin) {
              joined.back().second = r * shard + end;
            } else {
              joined.emplace_back(r * shard + begin, r * shard + end);
            }
          }
        }
        const std::string what = whole.config.model_type + " tp rank " + std::to_string(tp_rank) + " of " + std::to_string(tp) + ", dp " + std::to_string(dp);
        EXPECT_EQ(joined, gradient_norm_runs(part, tp_rank)) << what;
        const bool all = joined == std::vector<std::pair<int64_t, int64_t>>{{0, part.parameter_count}};
        EXPECT_EQ(all, tp_rank == 0) << what << ": the other ranks skip the replicated parameters";
      }
    }
  }
}

// pp × ZeRO-1 (with rank-order sums, as the GPU step runs): every stage's
// buffers are its stage's tp part's ZeRO buffers (cuda/zero_shards.h), and
// its comm_buffers beside its bucket are the pipeline's send and receive
// buffers (B·T·h bf16 each: 2 per neighbour) and the largest scratch of the
// sums that never overlap (after backward's tensor-parallel sums, a tied
// embedding's sum between the end stages, then the bucket's reduce-scatter;
// cuda/gpt_training.cpp): the tp sum's tp rows of ⌈B·T·h/tp⌉, the tied sum's
// 2 rows of ⌈⌈V/tp⌉·h/2⌉ (one piece, under a 25 MiB DDP bucket), the bucket.
// 1F1B on 2 and 3 stages of the 3-block models, and interleaved with 2
// chunks a stage on 2 stages of 4 blocks and 3 of 6 (every stage's four
// boundary buffers: the wrap-around), over 6 micro-batches.
TEST(HybridZeroPart, PipelineStagesBuffersAreThePlannersStageEstimate) {
  constexpr int64_t B = 1, T = 8, dp = 2;
  auto gpu = planner::load_gpu("h100-80g");
  ASSERT_TRUE(gpu.ok());
  struct Pipeline {
    int64_t pp, chunks, blocks;
  };
  for (const auto& [json, tp] : kCases) {
    for (const Pipeline& pipeline : {Pipeline{2, 1, 3}, Pipeline{3, 1, 3}, Pipeline{2, 2, 4}, Pipeline{3, 2, 6}}) {
      const int64_t pp = pipeline.pp, chunks = pipeline.chunks;
      const planner::Model whole = testing::awkward_model(json, pipeline.blocks);
      const int64_t h = whole.config.hidden_size;
      // 1000 elements: on GPT-2's end stages the tied sum's scratch (2 × 1188 bf16) is the largest; the whole part: the bucket's.
      for (const int64_t bucket : {int64_t{1000}, int64_t{1} << 30}) {
        planner::EstimateRequest request;
        request.layout = planner::ParallelLayout{dp, tp, pp, false};
        request.plugin = hybrid(1, bucket);
        request.plugin.pp_schedule = chunks > 1 ? planner::PipelineSchedule::interleaved : planner::PipelineSchedule::one_f_one_b;
        request.plugin.num_model_chunks = chunks;
        request.plugin.rank_order_reduction = true;
        request.training.precision = planner::Precision::bf16;
        request.training.micro_batch_size = B;
        request.training.seq_len = T;
        request.training.num_micro_batches = 6;
        auto estimate = planner::estimate_memory(whole, gpu.value(), request);
        ASSERT_TRUE(estimate.ok()) << estimate.error().message;
        for (int64_t s = 0; s < pp; ++s) {
          const std::string what = whole.config.model_type + " tp " + std::to_string(tp) + " × pp " + std::to_string(pp) + " × " + std::to_string(chunks) +
                                   " chunks, stage " + std::to_string(s) +
                                   " × dp " + std::to_string(dp) + ", bucket " + std::to_string(bucket);
          const planner::RankMemory* row = nullptr;
          for (const planner::RankMemory& r : estimate->ranks) {
            if (r.first_stage <= s && s <= r.last_stage) row = &r;
          }
          ASSERT_NE(row, nullptr) << what;
          const planner::Model part = planner::tp_rank_model(planner::stage_model(whole, planner::PipelinePlacement{pp, s, chunks}), tp);
          const ZeroBuffers b = zero_buffers(part, request.plugin, dp);
          const int64_t shard = planner::optimizer_layout(part, request.plugin, dp, dp - 1).shard_numel;
          const bool first = s == 0, last = s == pp - 1;
          EXPECT_EQ(row->bytes[MemoryCategory::parameters].device, 2 * b.parameters) << what;
          EXPECT_EQ(row->bytes[MemoryCategory::gradients].device, 2 * b.full_gradients) << what;
          EXPECT_EQ(row->bytes[MemoryCategory::master_weights].device, 4 * shard) << what;
          EXPECT_EQ(row->bytes[MemoryCategory::optimizer_states].device, 2 * 4 * shard) << what;
          const int64_t boundaries = (chunks > 1 ? 4 : (first ? 0 : 2) + (last ? 0 : 2)) * B * T * h * 2;
          const int64_t tp_sum = (B * T * h + tp - 1) / tp * tp * 2;
          const int64_t tied = whole.config.tie_word_embeddings && (first || last) ? (whole.config.vocab_size + tp - 1) / tp * h : 0;
          const int64_t scratch = std::max({tp_sum, (tied + 1) / 2 * 2 * 2, 2 * b.buckets_numel()});
          EXPECT_EQ(row->bytes[MemoryCategory::comm_buffers].device, boundaries + 2 * b.buckets_numel() + scratch) << what;
        }
      }
    }
  }
}

TEST(HybridZeroPart, GpuStepRunsStagesZeroToTwoAndOffloadsOneAndTwo) {
  for (const int stage : {0, 1, 2}) {
    EXPECT_TRUE(check_gpu_plugin(hybrid(stage, 1000)).ok()) << "stage " << stage;
    planner::PluginOptions offloaded = hybrid(stage, 1000);
    offloaded.cpu_offload = true;
    const Status checked = check_gpu_plugin(offloaded);
    EXPECT_EQ(checked.ok(), stage > 0) << "stage " << stage;
    if (stage == 0) {
      EXPECT_EQ(checked.error().message, "--cpu-offload: hybrid_parallel offloads its ZeRO optimizer; use --zero-stage 1 or 2, or leave it out");
    }
  }
  // The shards of 2 or more data-parallel ranks; one rank's optimizer is not sharded.
  planner::PluginOptions offloaded = hybrid(1, 1000);
  offloaded.cpu_offload = true;
  EXPECT_TRUE(check_gpu_layout(offloaded, planner::ParallelLayout{2, 2, 2, false}).ok());
  const Status one_rank = check_gpu_layout(offloaded, planner::ParallelLayout{1, 2, 1, false});
  ASSERT_FALSE(one_rank.ok());
  EXPECT_EQ(one_rank.error().message, "--cpu-offload: on GPUs the engine offloads the shards of 2 or more data-parallel ranks; give --dp 2 or more, or leave it out");
  const Status stage3 = check_gpu_plugin(hybrid(3, 1000));
  ASSERT_FALSE(stage3.ok());
  EXPECT_EQ(stage3.error().message, "--zero-stage 3: hybrid_parallel on GPUs runs ZeRO stage 0, 1 or 2; use one of them");
}

}  // namespace
}  // namespace tessera::engine
