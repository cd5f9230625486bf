// Training speed on the CPU against the machine's limit: tokens/s and achieved
// GFLOP/s of a training step for a 6-layer, 384-hidden GPT (6 heads, byte-level
// vocabulary) at sequence 256, next to cblas_sgemm alone on the same GEMM shapes.
// Target: the step reaches at least 60% of the GEMM-only GFLOP/s. The bf16
// step (mixed precision: 16-bit storage, GEMMs through fp32 tiles) runs beside it.
#include <benchmark/benchmark.h>

#include <vector>

#include "tessera/engine/data.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/ops/gemm.h"
#include "tessera/planner/flops.h"

namespace {

using namespace tessera;

constexpr int64_t kBatch = 8, kSeq = 256, kHidden = 384, kLayers = 6, kVocab = 256;

planner::Model bench_model() {
  const std::string config = R"({"model_type":"gpt2","vocab_size":256,"n_embd":384,"n_layer":6,"n_head":6,"n_positions":256})";
  return planner::make_model(planner::parse_model_config(config, "bench").value());
}

// T: float for fp32 training, bf16 for mixed precision (16-bit storage, fp32 arithmetic).
template <typename T>
void BM_TrainStepGpt6x384(benchmark::State& state) {
  const planner::Model model = bench_model();
  engine::MemoryLedger ledger;
  engine::Transformer<T> net = engine::Transformer<T>::create(model, ledger, kBatch, kSeq, 1).value();
  std::vector<int32_t> tokens(kBatch * kSeq), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7) % kVocab);
    targets[i] = static_cast<int32_t>((i * 7 + 1) % kVocab);
  }
  for (auto _ : state) {
    net.zero_gradients();
    benchmark::DoNotOptimize(net.forward(tokens.data(), targets.data()));
    net.backward(1.0f);
  }
  const planner::FlopsPerToken f = planner::flops_per_token(model, kSeq, planner::RecomputeMode::none);
  const double tokens_per_step = static_cast<double>(kBatch * kSeq);
  state.counters["tokens_per_s"] = benchmark::Counter(tokens_per_step, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_per_s"] = benchmark::Counter(tokens_per_step * (f.forward + f.backward) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStepGpt6x384<float>)->Name("BM_TrainStepGpt6x384/fp32")->Unit(benchmark::kMillisecond)->MinTime(3.0);
BENCHMARK(BM_TrainStepGpt6x384<engine::bf16>)->Name("BM_TrainStepGpt6x384/bf16")->Unit(benchmark::kMillisecond)->MinTime(3.0);

// The GEMMs of one step of the same model: forward out = in · W and, in
// backward, dIn = dOut · Wᵀ and dW = Inᵀ · dOut, for every linear layer.
void BM_SgemmSameShapes(benchmark::State& state) {
  engine::cpu::configure_blas_threads();
  const int64_t N = kBatch * kSeq, C = kHidden;
  struct Shape {
    int64_t in, out;
  };
  std::vector<Shape> shapes;
  for (int64_t l = 0; l < kLayers; ++l) {
    for (Shape s : {Shape{C, 3 * C}, Shape{C, C}, Shape{C, 4 * C}, Shape{4 * C, C}}) shapes.push_back(s);
  }
  shapes.push_back({C, kVocab});
  std::vector<float> a(static_cast<size_t>(N * 4 * C), 0.5f), w(static_cast<size_t>(4 * C * 4 * C), 0.25f), out(static_cast<size_t>(N * 4 * C));
  double flops = 0;
  for (auto _ : state) {
    for (const Shape& s : shapes) {
      using engine::cpu::GemmShape;
      engine::cpu::blas_gemm(GemmShape{false, false, N, s.out, s.in, s.in, s.out, s.out}, 1.0f, a.data(), w.data(), 0.0f, out.data());  // forward
      engine::cpu::blas_gemm(GemmShape{false, true, N, s.in, s.out, s.out, s.out, s.in}, 1.0f, out.data(), w.data(), 0.0f, a.data());  // dIn
      engine::cpu::blas_gemm(GemmShape{true, false, s.in, s.out, N, s.in, s.out, s.out}, 1.0f, a.data(), out.data(), 1.0f, w.data());  // dW
    }
  }
  for (const Shape& s : shapes) flops += 3 * 2.0 * static_cast<double>(N * s.in * s.out);
  state.counters["GFLOP_per_s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SgemmSameShapes)->Unit(benchmark::kMillisecond)->MinTime(3.0);

}  // namespace
