// The CPU engine's attention alone, forward and backward of one micro-batch, at
// the training benchmark's shape (8 × 256 tokens, 6 heads of 64), tiny-llama's
// (4 heads of 32 sharing 2 K/V heads) at sequence 1024, and 8 heads of 64 at
// 2048: `build/bench/attention_bench`. fp32, and bf16 storage computing in fp32.
#include <benchmark/benchmark.h>

#include <vector>

#include "tessera/engine/ops/attention.h"

namespace {

using namespace tessera;
using namespace tessera::engine::cpu;

// Arguments: batch, sequence, heads, K/V heads, head size.
template <typename T>
void BM_Attention(benchmark::State& state) {
  const int64_t B = state.range(0), T_len = state.range(1), NH = state.range(2), KVH = state.range(3), HS = state.range(4);
  configure_blas_threads();
  const int64_t width = (NH + 2 * KVH) * HS;
  const AttentionShape s{B, T_len, NH, KVH, HS, width, width};
  std::vector<T> qkv(static_cast<size_t>(B * T_len * width)), dqkv(qkv.size()), out(static_cast<size_t>(B * T_len * NH * HS)), dout(out.size());
  std::vector<engine::compute_t<T>> lse(static_cast<size_t>(B * NH * T_len));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = engine::narrow<T>(static_cast<float>(i * 37 % 101) / 101.0f - 0.5f);
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = engine::narrow<T>(static_cast<float>(i * 53 % 97) / 97.0f - 0.5f);
  engine::MemoryLedger ledger;
  Workspace<engine::compute_t<T>> workspace(ledger, T_len, HS, engine::is_16_bit<T> ? planner::Precision::bf16 : planner::Precision::fp32);
  const T* q = qkv.data();
  const T* k = q + NH * HS;
  const T* v = k + KVH * HS;
  for (auto _ : state) {
    attention_forward(out.data(), lse.data(), q, k, v, s, workspace);
    attention_backward(dqkv.data(), dqkv.data() + NH * HS, dqkv.data() + (NH + KVH) * HS, dout.data(), q, k, v, out.data(), lse.data(), s,
                       workspace);
  }
}
#define ATTENTION_SHAPES ->Args({8, 256, 6, 6, 64})->Args({1, 1024, 4, 2, 32})->Args({1, 2048, 8, 8, 64})->Unit(benchmark::kMillisecond)->MinTime(2.0)
BENCHMARK(BM_Attention<float>)->Name("attention/fp32") ATTENTION_SHAPES;
BENCHMARK(BM_Attention<engine::bf16>)->Name("attention/bf16") ATTENTION_SHAPES;

}  // namespace
