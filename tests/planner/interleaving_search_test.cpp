// Issue 11: the plan search interleaves with every chunk count that divides
// each stage's blocks, predicts the fastest count per layout from its 1F1B
// twin instead of simulating every count, and shows one interleaved row per
// layout at that count.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tessera/planner/pipeline_stages.h"
#include "tessera/planner/search.h"
#include "tessera/planner/simulate.h"
#include "test_models.h"

namespace tessera::planner {
namespace {

PlanRequest on(const char* gpu, int64_t gpus, int64_t global_batch, int64_t seq) {
  PlanRequest r;
  r.cluster = make_cluster(testing::shipped_gpu(gpu), gpus, 8, 400).value();
  r.global_batch_size = global_batch;
  r.seq_len = seq;
  return r;
}

TEST(InterleavedChunkCounts, DivideEveryStagesBlocks) {
  EXPECT_EQ(interleaved_chunk_counts(80, 4), (std::vector<int64_t>{2, 4, 5, 10, 20}));
  EXPECT_EQ(interleaved_chunk_counts(48, 8), (std::vector<int64_t>{2, 3, 6}));
  EXPECT_EQ(interleaved_chunk_counts(80, 16), (std::vector<int64_t>{5}));
  EXPECT_EQ(interleaved_chunk_counts(32, 32), (std::vector<int64_t>{}));
  // Uneven splits (5, 6 × 10, 5 and 7, 8 × 14, 7): q and q + 1 share no divisor.
  EXPECT_EQ(interleaved_chunk_counts(70, 12), (std::vector<int64_t>{}));
  EXPECT_EQ(interleaved_chunk_counts(126, 16), (std::vector<int64_t>{}));
  EXPECT_EQ(interleaved_chunk_counts(32, 1), (std::vector<int64_t>{}));
}

// Each interleaved row against its layout at every other chunk count that fits, simulated.
struct ChunkComparison {
  int rows = 0;
  int rows_not_at_2 = 0;      // rows whose count is not 2, where 2 is a valid count
  int rows_beaten = 0;        // rows some other count runs faster than
};

ChunkComparison compare_every_count(const Model& model, const PlanRequest& request, const PlanSearchResult& result) {
  ChunkComparison out;
  for (const Candidate& row : result.plans) {
    if (row.request.plugin.pp_schedule != PipelineSchedule::interleaved) continue;
    ++out.rows;
    const std::vector<int64_t> counts = interleaved_chunk_counts(model.config.num_layers, row.request.layout.pp);
    EXPECT_NE(std::find(counts.begin(), counts.end(), row.request.plugin.num_model_chunks), counts.end()) << describe_plan(row.request);
    if (row.request.plugin.num_model_chunks != 2 && counts.front() == 2) ++out.rows_not_at_2;
    for (int64_t v : counts) {
      EstimateRequest other = row.request;
      other.plugin.num_model_chunks = v;
      auto memory = estimate_memory(model, request.cluster.gpu, other);
      if (!memory.ok() || !memory->fits()) continue;
      auto step = simulate_step(model, request.cluster, other, memory.value(), request.simulation, false);
      EXPECT_TRUE(step.ok());
      if (step.ok() && step->tokens_per_s > row.simulation.tokens_per_s) {
        ++out.rows_beaten;
        ADD_FAILURE() << describe_plan(row.request) << " runs " << row.simulation.tokens_per_s << " tokens/s, " << v << " chunks "
                      << step->tokens_per_s;
        break;
      }
    }
  }
  return out;
}

// Llama-2-70B on 1024 H100s (the benchmark's search): one layer per virtual
// stage hides most of a long pipeline's bubble, and the sends (16-32 MiB across
// nodes) cost less than the bubble they save, so most rows take more than 2 chunks.
TEST(InterleavedSearch, EachRowRunsItsFastestChunkCountOnLlama70b) {
  const Model model = testing::shipped_model("llama-2-70b");
  const PlanRequest request = on("h100-80g", 1024, 2048, 4096);
  const auto result = search_plans(model, request);
  ASSERT_TRUE(result.ok());
  const ChunkComparison c = compare_every_count(model, request, result.value());
  EXPECT_GT(c.rows, 20);
  EXPECT_GT(c.rows_not_at_2, c.rows / 2);
  EXPECT_EQ(c.rows_beaten, 0);
  const EstimateRequest& best = result->plans.front().request;
  EXPECT_EQ(best.plugin.pp_schedule, PipelineSchedule::interleaved) << describe_plan(best);
  EXPECT_GT(best.plugin.num_model_chunks, 2) << describe_plan(best);
}

// GPT-2 XL on 16 A100-40GBs: its head (1600 × 50257) outweighs five blocks, so
// the chunk that holds it sets the interleaved pipeline's pace and fewer chunks
// than the bubble alone predicts can run faster; the smaller counts tried after
// the prediction find them.
TEST(InterleavedSearch, EachRowRunsItsFastestChunkCountOnGpt2Xl) {
  const Model model = testing::shipped_model("gpt2-xl");
  const PlanRequest request = on("a100-40g", 16, 256, 1024);
  const auto result = search_plans(model, request);
  ASSERT_TRUE(result.ok());
  const ChunkComparison c = compare_every_count(model, request, result.value());
  EXPECT_GT(c.rows, 5);
  EXPECT_EQ(c.rows_beaten, 0);
}

// --pp-schedule (tessera plan): only the named schedule's pipelines are
// kept, layouts without a pipeline too; the same rows as the whole search's,
// less the other schedule's. GPT-2 on 4 H100s, whose best pipeline interleaves
// (the GPU step runs 1F1B only: a plan for it is made with --pp-schedule 1f1b).
TEST(InterleavedSearch, APipelineScheduleFilterKeepsThatSchedulesPipelinesOnly) {
  const Model model = testing::shipped_model("gpt2");
  const PlanRequest request = on("h100-80g", 4, 16, 1024);
  const auto all = search_plans(model, request);
  ASSERT_TRUE(all.ok());
  const auto first_pipeline = std::find_if(all->plans.begin(), all->plans.end(), [](const Candidate& c) { return c.request.layout.pp > 1; });
  ASSERT_NE(first_pipeline, all->plans.end());
  EXPECT_EQ(first_pipeline->request.plugin.pp_schedule, PipelineSchedule::interleaved) << describe_plan(first_pipeline->request);
  for (PipelineSchedule schedule : {PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved}) {
    PlanRequest only = request;
    only.pp_schedule = schedule;
    const auto filtered = search_plans(model, only);
    ASSERT_TRUE(filtered.ok());
    std::vector<std::string> expected, kept;
    for (const Candidate& c : all->plans) {
      if (c.request.layout.pp == 1 || c.request.plugin.pp_schedule == schedule) expected.push_back(describe_plan(c.request));
    }
    for (const Candidate& c : filtered->plans) kept.push_back(describe_plan(c.request));
    EXPECT_EQ(kept, expected);
    EXPECT_TRUE(std::any_of(filtered->plans.begin(), filtered->plans.end(), [](const Candidate& c) { return c.request.layout.pp > 1; }));
  }
  PlanRequest gpipe = request;
  gpipe.pp_schedule = PipelineSchedule::gpipe;
  const auto refused = search_plans(model, gpipe);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "--pp-schedule gpipe: the search runs ColossalAI's pipelines, 1F1B and interleaved; use --pp-schedule 1f1b or interleaved");
}

// Every candidate the search offers is one the estimate accepts, under
// ColossalAI's runtime and Megatron-Core's, which needs equal chunks.
TEST(InterleavedSearch, EveryOfferedChunkCountIsValidForTheEstimate) {
  const Model model = testing::shipped_model("llama-2-70b");
  const PlanRequest request = on("h100-80g", 1024, 2048, 4096);
  const auto result = search_plans(model, request);
  ASSERT_TRUE(result.ok());
  std::vector<EstimateRequest> offered = plan_candidates(model, request);
  for (const Candidate& c : result->plans) offered.push_back(c.request);
  int interleaved = 0;
  for (EstimateRequest r : offered) {
    if (r.plugin.pp_schedule != PipelineSchedule::interleaved) continue;
    ++interleaved;
    EXPECT_TRUE(validate_request(model, request.cluster.gpu, r).ok()) << describe_plan(r);
    r.plugin.runtime = Runtime::megatron;
    EXPECT_TRUE(validate_request(model, request.cluster.gpu, r).ok()) << describe_plan(r);
  }
  EXPECT_GT(interleaved, 100);
}

// Megatron-Core refuses a count that leaves some stage's blocks in unequal chunks.
TEST(InterleavedSearch, MegatronRuntimeRefusesUnequalChunks) {
  const Model model = testing::shipped_model("llama-2-70b");
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.runtime = Runtime::megatron;
  r.plugin.pp_schedule = PipelineSchedule::interleaved;
  r.plugin.num_model_chunks = 3;
  r.layout = ParallelLayout{1, 8, 4, true};
  r.training.num_micro_batches = 8;
  r.training.seq_len = 4096;
  const Status s = validate_request(model, testing::shipped_gpu("h100-80g"), r);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "--model-chunks 3 does not divide the blocks of every stage (20 × 4), which Megatron-Core requires; "
                               "use --model-chunks 2, 4, 5, 10, 20");
  r.plugin.runtime = Runtime::colossalai;  // PipelineStageManager spreads 80 blocks over 12 virtual stages
  EXPECT_TRUE(validate_request(model, testing::shipped_gpu("h100-80g"), r).ok());
}

// One interleaved candidate per layout, micro-batch and recompute mode: the
// search estimates a few more chunk counts than it has candidates, where
// estimating every count would take well over half as many again. (The three
// modes named: no plan is tried again with fewer blocks recomputed.)
TEST(InterleavedSearch, CandidateCountsDoNotGrowWithTheChunkCounts) {
  const Model model = testing::shipped_model("llama-2-70b");
  PlanRequest request = on("h100-80g", 1024, 2048, 4096);
  request.recompute = {kSearchedRecomputeModes.begin(), kSearchedRecomputeModes.end()};
  const std::vector<EstimateRequest> candidates = plan_candidates(model, request);
  int64_t interleaved = 0, every_count = 0;
  for (const EstimateRequest& r : candidates) {
    const bool chunked = r.plugin.pp_schedule == PipelineSchedule::interleaved;
    interleaved += chunked ? 1 : 0;
    every_count += chunked ? static_cast<int64_t>(interleaved_chunk_counts(model.config.num_layers, r.layout.pp).size()) : 1;
  }
  EXPECT_EQ(candidates.size(), 1038u);  // 6 of them torch_fsdp offloaded: 2 strategies × 3 recompute modes at 1 micro-batch of 2
  EXPECT_EQ(interleaved, 336);
  EXPECT_EQ(every_count, 2046);
  const auto result = search_plans(model, request);
  ASSERT_TRUE(result.ok());
  EXPECT_LT(result->candidates_evaluated, static_cast<int64_t>(candidates.size()) * 11 / 10);
}

}  // namespace
}  // namespace tessera::planner
