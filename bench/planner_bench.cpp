// Speed of one memory estimate (target: under 20 µs), for the plugins whose
// estimate does the most work. The model is loaded once, as the plan search
// and the GUI do; the Gemini chunk size is given, as the search passes it.
#include <benchmark/benchmark.h>

#include "tessera/planner/chunks.h"
#include "tessera/planner/memory_model.h"
#include "tessera/planner/registry.h"
#include "tessera/planner/search.h"

namespace {

using namespace tessera::planner;

struct Fixture {
  Model model;
  GpuProfile gpu;
};

Fixture load(const char* model_name) { return Fixture{load_model(model_name).value(), load_gpu("h100-80g").value()}; }

void run_estimates(benchmark::State& state, const Fixture& f, const EstimateRequest& request) {
  for (auto _ : state) {
    auto estimate = estimate_memory(f.model, f.gpu, request);
    benchmark::DoNotOptimize(estimate);
  }
}

void BM_EstimateDdpGpt2Medium(benchmark::State& state) {
  static const Fixture f = load("gpt2-medium");
  EstimateRequest r;
  r.layout.dp = 8;
  r.training.micro_batch_size = 8;
  run_estimates(state, f, r);
}
BENCHMARK(BM_EstimateDdpGpt2Medium);

void BM_EstimateHybridLlama70b(benchmark::State& state) {
  static const Fixture f = load("llama-2-70b");
  EstimateRequest r;
  r.plugin.kind = PluginKind::hybrid_parallel;
  r.plugin.zero_stage = 1;
  r.layout = ParallelLayout{16, 8, 8, true};
  r.training.num_micro_batches = 32;
  r.training.seq_len = 4096;
  run_estimates(state, f, r);
}
BENCHMARK(BM_EstimateHybridLlama70b);

void BM_EstimateGeminiLlama7b(benchmark::State& state) {
  static const Fixture f = load("llama-2-7b");
  EstimateRequest r;
  r.plugin.kind = PluginKind::gemini;
  r.layout.dp = 8;
  r.plugin.gemini.chunk_size = search_chunk_size(f.model.inventory, r.plugin.gemini, 8);
  run_estimates(state, f, r);
}
BENCHMARK(BM_EstimateGeminiLlama7b);

void BM_ChunkSearchLlama7b(benchmark::State& state) {
  static const Fixture f = load("llama-2-7b");
  for (auto _ : state) benchmark::DoNotOptimize(search_chunk_size(f.model.inventory, GeminiOptions{}, 8));
}
BENCHMARK(BM_ChunkSearchLlama7b)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// The whole plan search (issue target: Llama-2-70B on 1024 GPUs under 1 s on one
// core; a 7B model on 8 GPUs under 50 ms, since the GUI re-plans on every change).
void run_search(benchmark::State& state, const char* model_name, int64_t gpus, int64_t global_batch, int64_t seq) {
  const Model model = load_model(model_name).value();
  PlanRequest request;
  request.cluster = make_cluster(load_gpu("h100-80g").value(), gpus, 8, 400).value();
  request.global_batch_size = global_batch;
  request.seq_len = seq;
  int64_t candidates = 0;
  for (auto _ : state) {
    auto result = search_plans(model, request);
    candidates = result->candidates_evaluated;
    benchmark::DoNotOptimize(result);
  }
  state.counters["candidates"] = static_cast<double>(candidates);
}

void BM_SearchLlama7bOn8Gpus(benchmark::State& state) { run_search(state, "llama-2-7b", 8, 64, 4096); }
BENCHMARK(BM_SearchLlama7bOn8Gpus)->Unit(benchmark::kMillisecond);

void BM_SearchLlama70bOn1024Gpus(benchmark::State& state) { run_search(state, "llama-2-70b", 1024, 2048, 4096); }
BENCHMARK(BM_SearchLlama70bOn1024Gpus)->Unit(benchmark::kMillisecond);

}  // namespace
