// Context parallelism's ring attention on one GPU per rank: `mpirun -np N
// tessera_ring_attention_gpu_test` (tools/gpu-check with N = 2; ctest on 2
// ranks, skipped without 2 GPUs). Every rank draws the same whole sequences
// in bf16 and keeps its two chunks (planner/context_parallel.h); it runs the
// GPU ring (cuda/ring_attention.h: cuDNN per block, the merge kernel, NCCL)
// and the CPU engine's ring over MPI (model/ring_attention.h) on them,
// forward and backward, in both layouts the engine uses (GPT-2's fused q|k|v
// rows with as many key/value heads as query heads; Llama's separate q, k, v
// with grouped-query heads) and 64-wide heads (cuDNN's multiple of 8).
//
// Checked, on every rank:
//  - the output, the log-sum-exp and the q, k, v gradients against the CPU
//    ring's, in norm: output and gradients within 2^-6, the log-sum-exp
//    within 2^-12 (fp32 only). Both store bf16 and compute in fp32 but cuDNN
//    rounds the probabilities and dS to bf16 before their products (attention.h)
//    where the CPU op does not; attention_gpu_test.cpp bounds one block's
//    error by a unit of bf16 (2^-8) of each output's magnitudes, and the ring
//    adds at most cp such blocks and one rounding of the merged output;
//  - the NCCL group's send_recv calls (send and recv) equal the MPI group's
//    (the CPU ring's): both make planner::ring_sends(cp, none).forward +
//    .backward exchanges, the same blocks in the same order (model/ring_steps.h).
// These bounds have not yet met a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu_ranks.h"
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/ring_attention.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/ring_attention.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine::cuda::testing {
namespace {

struct Case {
  const char* name;
  int64_t B, chunk, NH, KVH, HS;
  bool fused;  // q, k, v side by side in each token's row
};

// Host and device copies of one rank's tensors, and where q, k, v lie among them.
struct Tensors {
  cpu::AttentionShape shape;
  int64_t k_offset, v_offset;
  std::vector<bf16> qkv, dout;
};

// Rows [offset, …) of `whole` (B samples of S rows, `stride` apart, `width`
// values each) at this rank's tokens' positions, into `local` at `local_offset`.
void keep_local_rows(std::vector<bf16>& local, int64_t local_offset, const std::vector<bf16>& whole, int64_t whole_offset, int64_t B, int64_t S,
                     int64_t stride, int64_t width, const planner::ContextSplit& split) {
  const int64_t T = S / split.cp;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      const bf16* from = whole.data() + whole_offset + (b * S + split.global_position(i, T)) * stride;
      std::copy_n(from, width, local.data() + local_offset + (b * T + i) * stride);
    }
  }
}

// This rank's tokens of the same random whole sequences on every rank, laid
// out as the whole ones: fused rows, or three planes (q, then k, then v).
Tensors local_tensors(const Case& c, const planner::ContextSplit& split) {
  const int64_t S = 2 * split.cp * c.chunk, T = S / split.cp, q = c.NH * c.HS, kv = c.KVH * c.HS, row = c.fused ? q + 2 * kv : q;
  Tensors t{{c.B, T, c.NH, c.KVH, c.HS, row, c.fused ? row : kv}, c.fused ? q : c.B * T * q, c.fused ? q + kv : c.B * T * (q + kv), {}, {}};
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bf16> whole(static_cast<size_t>(c.B * S * (q + 2 * kv))), whole_dout(static_cast<size_t>(c.B * S * q));
  for (bf16& x : whole) x = narrow<bf16>(normal(rng));
  for (bf16& x : whole_dout) x = narrow<bf16>(normal(rng));
  t.qkv.resize(static_cast<size_t>(c.B * T * (q + 2 * kv)));
  t.dout.resize(static_cast<size_t>(c.B * T * q));
  keep_local_rows(t.dout, 0, whole_dout, 0, c.B, S, q, q, split);
  if (c.fused) {
    keep_local_rows(t.qkv, 0, whole, 0, c.B, S, row, row, split);
  } else {
    keep_local_rows(t.qkv, 0, whole, 0, c.B, S, q, q, split);
    keep_local_rows(t.qkv, t.k_offset, whole, c.B * S * q, c.B, S, kv, kv, split);
    keep_local_rows(t.qkv, t.v_offset, whole, c.B * S * (q + kv), c.B, S, kv, kv, split);
  }
  return t;
}

template <typename X>
X* device_copy(const std::vector<X>& host) {
  void* memory = nullptr;
  if (cudaMalloc(&memory, host.size() * sizeof(X)) != cudaSuccess) return nullptr;
  if (cudaMemcpy(memory, host.data(), host.size() * sizeof(X), cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
  return static_cast<X*>(memory);
}

template <typename X>
std::vector<X> host_copy(const X* device, size_t n) {
  std::vector<X> host(n);
  if (device == nullptr || cudaMemcpy(host.data(), device, n * sizeof(X), cudaMemcpyDeviceToHost) != cudaSuccess) host.assign(n, X{});
  return host;
}

// ‖got − want‖ / ‖want‖.
template <typename X>
double norm_error(const std::vector<X>& got, const std::vector<X>& want) {
  double difference = 0, reference = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double w = static_cast<double>(widen(want[i])), d = static_cast<double>(widen(got[i])) - w;
    difference += d * d;
    reference += w * w;
  }
  return std::sqrt(difference) / std::max(std::sqrt(reference), 1e-30);
}

// Ring buffers of one kind: (B, T, KVH·HS) K/V blocks, (B, T, NH·HS) outputs, (B, NH, T) statistics.
template <typename Make>
auto ring_buffers(const cpu::AttentionShape& s, Make&& make) {
  const size_t block = static_cast<size_t>(2 * s.B * s.T * s.KVH * s.HS), outputs = static_cast<size_t>(s.B * s.T * s.NH * s.HS);
  bf16* kv = make(bf16{}, 2 * block);
  bf16* kv_grad = make(bf16{}, 2 * block);
  return RingBuffers<bf16>{{kv, kv + block}, {kv_grad, kv_grad + block}, make(bf16{}, outputs), make(float{}, static_cast<size_t>(s.B * s.NH * s.T)),
                           make(float{}, outputs)};
}

void check_case(const Case& c, comm::Communicator& mpi, comm::Communicator& nccl, Checker& check) {
  const int rank = mpi.rank();
  const planner::ContextSplit split{mpi.size(), rank};
  Tensors t = local_tensors(c, split);
  const cpu::AttentionShape& s = t.shape;
  const size_t outputs = t.dout.size(), stats = static_cast<size_t>(s.B * s.NH * s.T);

  // The CPU engine's ring over MPI.
  MemoryLedger cpu_ledger;
  cpu::Workspace<float> workspace(cpu_ledger, s.T, s.HS, planner::Precision::bf16);
  std::vector<std::vector<bf16>> cpu_narrow;
  std::vector<std::vector<float>> cpu_wide;
  const RingBuffers<bf16> cpu_ring = ring_buffers(s, [&](auto zero, size_t n) {
    if constexpr (std::is_same_v<decltype(zero), bf16>) {
      return cpu_narrow.emplace_back(n).data();
    } else {
      return cpu_wide.emplace_back(n).data();
    }
  });
  std::vector<bf16> cpu_out(outputs), cpu_dqkv(t.qkv.size());
  std::vector<float> cpu_lse(stats);
  ContextParallel context(&mpi);
  const comm::CommCounters mpi_before = mpi.counters();
  const bf16* q = t.qkv.data();
  context.attention_forward(cpu_out.data(), cpu_lse.data(), q, q + t.k_offset, q + t.v_offset, s, cpu_ring, workspace);
  context.attention_backward(cpu_dqkv.data(), cpu_dqkv.data() + t.k_offset, cpu_dqkv.data() + t.v_offset, t.dout.data(), q, q + t.k_offset,
                             q + t.v_offset, cpu_out.data(), cpu_lse.data(), s, cpu_ring, workspace);
  check.expect_ok(context.status(), std::string(c.name) + ": the CPU ring");

  // The GPU ring over NCCL, from the same inputs.
  CudaDeviceMemory memory;
  CudaEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(memory, events, ledger);
  Attention attention(allocator);
  check.expect(attention.error().empty(), std::string(c.name) + ": cuDNN: " + attention.error());
  std::vector<void*> owned;
  const RingBuffers<bf16> gpu_ring = ring_buffers(s, [&](auto zero, size_t n) {
    using X = decltype(zero);
    X* p = device_copy(std::vector<X>(n));
    owned.push_back(p);
    return p;
  });
  bf16* qkv = device_copy(t.qkv);
  bf16* dout = device_copy(t.dout);
  bf16* out = device_copy(std::vector<bf16>(outputs));
  bf16* dqkv = device_copy(std::vector<bf16>(t.qkv.size()));
  float* lse = device_copy(std::vector<float>(stats));
  RingAttention ring(attention, &nccl, nullptr);
  const comm::CommCounters nccl_before = nccl.counters();
  check.expect_ok(ring.forward(out, lse, qkv, qkv + t.k_offset, qkv + t.v_offset, s, gpu_ring), std::string(c.name) + ": GPU ring forward");
  check.expect_ok(ring.backward(dqkv, dqkv + t.k_offset, dqkv + t.v_offset, dout, qkv, qkv + t.k_offset, qkv + t.v_offset, out, lse, s, gpu_ring),
                  std::string(c.name) + ": GPU ring backward");
  check.expect(cudaDeviceSynchronize() == cudaSuccess, std::string(c.name) + ": the device finished");

  const auto verdict = [&](const std::string& what, double error, double tolerance) {
    report(rank, std::string(c.name) + " " + what, error, tolerance);
    check.expect(error <= tolerance, std::string(c.name) + " " + what + ": " + std::to_string(error) + " over " + std::to_string(tolerance));
  };
  verdict("output", norm_error(host_copy(out, outputs), cpu_out), 0x1p-6);
  verdict("log-sum-exp", norm_error(host_copy(lse, stats), cpu_lse), 0x1p-12);
  verdict("q, k, v gradients", norm_error(host_copy(dqkv, t.qkv.size()), cpu_dqkv), 0x1p-6);
  for (const comm::Collective kind : {comm::Collective::send, comm::Collective::recv}) {
    const int64_t gpu_calls = nccl.counters().calls_of(kind) - nccl_before.calls_of(kind);
    const int64_t cpu_calls = mpi.counters().calls_of(kind) - mpi_before.calls_of(kind);
    const planner::RingSends sends = planner::ring_sends(split.cp, planner::RecomputeMode::none);
    check.expect(gpu_calls == cpu_calls && gpu_calls == sends.forward + sends.backward,
                 std::string(c.name) + ": " + std::to_string(gpu_calls) + " NCCL exchanges, " + std::to_string(cpu_calls) + " on MPI, planner " +
                     std::to_string(sends.forward + sends.backward));
  }
  for (void* p : owned) cudaFree(p);
  for (void* p : {static_cast<void*>(qkv), static_cast<void*>(dout), static_cast<void*>(out), static_cast<void*>(dqkv), static_cast<void*>(lse)}) {
    cudaFree(p);
  }
}

}  // namespace
}  // namespace tessera::engine::cuda::testing

int main() {
  using namespace tessera::engine::cuda::testing;
  return run_on_gpu_ranks("ring_attention_gpu_test", [](tessera::engine::comm::Communicator& mpi, tessera::engine::comm::Communicator& nccl,
                                                        Checker& check) {
    check_case({"gpt2 layout", 2, 40, 4, 4, 64, true}, mpi, nccl, check);
    check_case({"llama layout", 1, 72, 8, 2, 64, false}, mpi, nccl, check);
  });
}
