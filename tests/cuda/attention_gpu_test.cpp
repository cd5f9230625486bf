// cuDNN's fused attention (engine/cuda/attention.h) against the CPU attention
// op (ops/attention.h, FlashAttention-2's formulation) run in double on the
// same 16-bit inputs: forward (out and the log-sum-exp), then backward from
// the same out and lse, in bf16 and fp16, in both layouts the engine uses
// (GPT-2's q, k, v side by side in each token's row; Llama's one after
// another, with grouped-query heads), on sequence lengths that are not
// multiples of cuDNN's tiles. Skipped without a CUDA device; run by
// tools/gpu-check. Without one, what can be checked is: cuDNN accepts every
// operation of both graphs, and the shape checks' one-line errors.
//
// Tolerances. cuDNN rounds the probabilities P (forward, and Pᵀ for dV) and
// dS (for dQ and dK) to the storage type before their products, and each
// output once more; everything else is fp32. So an output x = Σ terms is
// within u·Σ|terms| + u·|x| ≤ 2u·Σ|terms| of the exact value (u: the storage
// type's unit roundoff): one unit in the last place of T (reduction_tolerance)
// relative to Σ|terms|, which the test computes in double per output (for dQ
// and dK the bound P·(|dP| + Σ|dO∘O|) of dS = P·(dP − D) and of its fp32
// error); doubled for the fp32 parts (scores from HS products, exp, sums of
// T terms), each of which is below 2^-16 of the same magnitudes. The
// log-sum-exp is fp32 only: a score's error (sum_tolerance(HS) of Σ|q·k|·scale),
// the exponentials' and the sum's (sum_tolerance(T)) and log's (2^-20).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../kernels/kernel_check.h"
#include "device_buffer.h"
#include "tessera/engine/cuda/attention.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/ring_blocks.h"
#include "tessera/engine/ops/attention.h"

namespace tessera::engine::cuda::testing {
namespace {

using kernels::testing::elementwise_tolerance;
using kernels::testing::expect_close;
using kernels::testing::random_values;
using kernels::testing::reduction_tolerance;
using kernels::testing::sum_tolerance;
using kernels::testing::type_name;

using AttentionOnGpu = GpuTest;

struct Case {
  int64_t B, T, NH, KVH, HS;
  bool side_by_side;  // GPT-2's rows (q | k | v per token), else Llama's three blocks
};

// Where q, k and v lie in one buffer (the transformer's "qkv", qkv_views()).
struct Placement {
  cpu::AttentionShape shape;
  int64_t q, k, v, elements;  // offsets, and the buffer's size

  explicit Placement(const Case& c) {
    const int64_t qw = c.NH * c.HS, kvw = c.KVH * c.HS, N = c.B * c.T;
    if (c.side_by_side) {
      shape = {c.B, c.T, c.NH, c.KVH, c.HS, qw + 2 * kvw, qw + 2 * kvw};
      q = 0, k = qw, v = qw + kvw;
    } else {
      shape = {c.B, c.T, c.NH, c.KVH, c.HS, qw, kvw};
      q = 0, k = N * qw, v = N * (qw + kvw);
    }
    elements = N * (qw + 2 * kvw);
  }
};

// (B, T, width) rows `stride` apart from `offset`, copied contiguous and widened.
template <typename X>
std::vector<double> rows(const std::vector<X>& buffer, int64_t offset, int64_t stride, int64_t BT, int64_t width) {
  std::vector<double> out(static_cast<size_t>(BT * width));
  for (int64_t r = 0; r < BT; ++r) {
    for (int64_t d = 0; d < width; ++d) out[static_cast<size_t>(r * width + d)] = static_cast<double>(widen(buffer[static_cast<size_t>(offset + r * stride + d)]));
  }
  return out;
}

// Σ|terms| of every output, in double, from the probabilities the CPU's lse gives.
struct Magnitudes {
  std::vector<double> out, lse, dq, dk, dv;
};

Magnitudes magnitudes(const Case& c, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                      const std::vector<double>& out, const std::vector<double>& dout, const std::vector<double>& lse) {
  const int64_t B = c.B, T = c.T, NH = c.NH, KVH = c.KVH, HS = c.HS, group = NH / KVH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  auto at = [&](const std::vector<double>& x, int64_t heads, int64_t b, int64_t t, int64_t h) {
    return &x[static_cast<size_t>(((b * T + t) * heads + h) * HS)];
  };
  Magnitudes m{std::vector<double>(out.size()), std::vector<double>(lse.size()), std::vector<double>(q.size()),
               std::vector<double>(k.size()), std::vector<double>(v.size())};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const double* qt = at(q, NH, b, t, h);
        const double* ot = at(out, NH, b, t, h);
        const double* dot = at(dout, NH, b, t, h);
        const double L = lse[static_cast<size_t>((b * NH + h) * T + t)];
        double D_size = 0, largest_score = 0;
        for (int64_t d = 0; d < HS; ++d) D_size += std::abs(dot[d] * ot[d]);
        for (int64_t u = 0; u <= t; ++u) {
          const double* ku = at(k, KVH, b, u, g);
          const double* vu = at(v, KVH, b, u, g);
          double S = 0, S_size = 0, dP = 0;
          for (int64_t d = 0; d < HS; ++d) S += qt[d] * ku[d], S_size += std::abs(qt[d] * ku[d]), dP += dot[d] * vu[d];
          largest_score = std::max(largest_score, scale * S_size);
          const double P = std::exp(scale * S - L);
          const double dS_size = P * (std::abs(dP) + D_size);
          double* out_m = &m.out[static_cast<size_t>(((b * T + t) * NH + h) * HS)];
          double* dq_m = &m.dq[static_cast<size_t>(((b * T + t) * NH + h) * HS)];
          double* dk_m = &m.dk[static_cast<size_t>(((b * T + u) * KVH + g) * HS)];
          double* dv_m = &m.dv[static_cast<size_t>(((b * T + u) * KVH + g) * HS)];
          for (int64_t d = 0; d < HS; ++d) {
            out_m[d] += P * std::abs(vu[d]);
            dv_m[d] += P * std::abs(dot[d]);
            dq_m[d] += scale * dS_size * std::abs(ku[d]);
            dk_m[d] += scale * dS_size * std::abs(qt[d]);
          }
        }
        m.lse[static_cast<size_t>((b * NH + h) * T + t)] = largest_score;
      }
    }
  }
  return m;
}

template <typename T>
void check(Attention& attention, const Case& c) {
  const Placement p(c);
  const cpu::AttentionShape& s = p.shape;
  const int64_t BT = c.B * c.T, qw = c.NH * c.HS, kvw = c.KVH * c.HS;
  const std::string what = std::string(type_name<T>()) + " B" + std::to_string(c.B) + " T" + std::to_string(c.T) + " NH" +
                           std::to_string(c.NH) + " KVH" + std::to_string(c.KVH) + " HS" + std::to_string(c.HS) +
                           (c.side_by_side ? " rows" : " blocks");

  // The CPU op in double on the same 16-bit values.
  const std::vector<T> qkv = random_values<T>(static_cast<size_t>(p.elements), 91);
  const std::vector<T> dout = random_values<T>(static_cast<size_t>(BT * qw), 92);
  std::vector<double> qkv_d(qkv.size()), dout_d(dout.size());
  std::transform(qkv.begin(), qkv.end(), qkv_d.begin(), [](T x) { return static_cast<double>(widen(x)); });
  std::transform(dout.begin(), dout.end(), dout_d.begin(), [](T x) { return static_cast<double>(widen(x)); });
  MemoryLedger ledger;
  cpu::Workspace<double> workspace(ledger, c.T, c.HS, planner::Precision::fp32);
  std::vector<double> out_d(static_cast<size_t>(BT * qw)), lse_d(static_cast<size_t>(c.B * c.NH * c.T));
  cpu::attention_forward(out_d.data(), lse_d.data(), qkv_d.data() + p.q, qkv_d.data() + p.k, qkv_d.data() + p.v, s, workspace);

  // Forward on the GPU.
  DeviceBuffer<T> d_qkv(qkv), d_out(static_cast<size_t>(BT * qw));
  DeviceBuffer<float> d_lse(lse_d.size());
  ASSERT_EQ(attention.forward(d_out.get(), d_lse.get(), d_qkv.get() + p.q, d_qkv.get() + p.k, d_qkv.get() + p.v, s, nullptr), "") << what;

  // Backward on both from the same out (rounded to T) and lse (rounded to fp32).
  std::vector<T> out(out_d.size());
  std::transform(out_d.begin(), out_d.end(), out.begin(), [](double x) { return narrow<T>(static_cast<float>(x)); });
  std::vector<float> lse(lse_d.size());
  std::transform(lse_d.begin(), lse_d.end(), lse.begin(), [](double x) { return static_cast<float>(x); });
  std::vector<double> out_used(out.size()), lse_used(lse.begin(), lse.end()), dqkv_d(qkv.size(), 0.0);
  std::transform(out.begin(), out.end(), out_used.begin(), [](T x) { return static_cast<double>(widen(x)); });
  cpu::attention_backward(dqkv_d.data() + p.q, dqkv_d.data() + p.k, dqkv_d.data() + p.v, dout_d.data(), qkv_d.data() + p.q,
                          qkv_d.data() + p.k, qkv_d.data() + p.v, out_used.data(), lse_used.data(), s, workspace);
  DeviceBuffer<T> d_dqkv(qkv.size()), d_dout(dout), d_out_used(out);
  DeviceBuffer<float> d_lse_used(lse);
  ASSERT_EQ(attention.backward(d_dqkv.get() + p.q, d_dqkv.get() + p.k, d_dqkv.get() + p.v, d_dout.get(), d_qkv.get() + p.q,
                               d_qkv.get() + p.k, d_qkv.get() + p.v, d_out_used.get(), d_lse_used.get(), s, nullptr),
            "")
      << what;

  const std::vector<double> q_c = rows(qkv_d, p.q, s.q_stride, BT, qw), k_c = rows(qkv_d, p.k, s.kv_stride, BT, kvw),
                            v_c = rows(qkv_d, p.v, s.kv_stride, BT, kvw);
  const Magnitudes m = magnitudes(c, q_c, k_c, v_c, out_used, dout_d, lse_used);
  const double bound = 2 * reduction_tolerance<T>();
  expect_close("attention out " + what, d_out.host(), out_d, bound, m.out);
  expect_close("attention lse " + what, d_lse.host(), lse_d,
               sum_tolerance(c.HS) + sum_tolerance(c.T) + elementwise_tolerance<float>(), m.lse);
  const std::vector<T> dqkv = d_dqkv.host();
  expect_close("attention dq " + what, rows(dqkv, p.q, s.q_stride, BT, qw), rows(dqkv_d, p.q, s.q_stride, BT, qw), bound, m.dq);
  expect_close("attention dk " + what, rows(dqkv, p.k, s.kv_stride, BT, kvw), rows(dqkv_d, p.k, s.kv_stride, BT, kvw), bound, m.dk);
  expect_close("attention dv " + what, rows(dqkv, p.v, s.kv_stride, BT, kvw), rows(dqkv_d, p.v, s.kv_stride, BT, kvw), bound, m.dv);
}

const Case kCases[] = {{2, 77, 4, 4, 64, true}, {1, 1, 2, 1, 128, false}, {3, 130, 8, 2, 64, false}, {2, 200, 6, 3, 80, false},
                       {1, 257, 12, 12, 64, true}};

TEST_F(AttentionOnGpu, MatchesTheCpuOpForwardAndBackward) {
  CudaDeviceMemory memory;
  CudaEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(memory, events, ledger);
  Attention attention(allocator);
  ASSERT_EQ(attention.error(), "");
  for (const Case& c : kCases) {
    check<bf16>(attention, c);
    check<fp16>(attention, c);
  }
  EXPECT_GT(ledger.peak(MemoryCategory::workspace, MemorySpace::device), 0) << "the workspace is booked";
}

// Without a device: cuDNN accepts every operation of both graphs (types,
// dimensions, strides, modes) for the shapes above; only the plan needs a GPU.
TEST(AttentionGraphs, CudnnFinalizesEveryOperationWithoutADevice) {
  for (const Case& c : kCases) {
    const cpu::AttentionShape s = Placement(c).shape;
    EXPECT_EQ(Attention::graphs_refused<bf16>(s), "");
    EXPECT_EQ(Attention::graphs_refused<fp16>(s), "");
  }
}

// Ring attention's blocks (model/ring_blocks.h), as the GPU ring runs them:
// every step of every rank at cp 2 and 3, on local sequences of 130 and 200
// tokens, whole and received (keys and values packed, fewer rows or keys,
// unmasked).
TEST(AttentionGraphs, CudnnFinalizesEveryRingBlockWithoutADevice) {
  for (const Case& c : {kCases[2], kCases[3]}) {
    const cpu::AttentionShape s = Placement(c).shape;
    for (int64_t cp : {2, 3}) {
      for (int64_t rank = 0; rank < cp; ++rank) {
        for (int64_t step = 0; step < cp; ++step) {
          const RingBlock block = ring_block(step, rank, cp, s.T);
          const cpu::AttentionShape part = step == 0 ? s : received_block_shape(s, block);
          const std::string at = "cp " + std::to_string(cp) + " rank " + std::to_string(rank) + " step " + std::to_string(step);
          EXPECT_EQ(Attention::graphs_refused<bf16>(part), "") << at;
          EXPECT_EQ(Attention::graphs_refused<fp16>(part), "") << at;
        }
      }
    }
  }
}

TEST(AttentionShapes, CudnnLimitsAreOneLineErrors) {
  EXPECT_EQ(Attention::unsupported({2, 7, 4, 2, 64, 128, 64}), "");
  EXPECT_EQ(Attention::unsupported({2, 7, 4, 2, 36, 144, 72}), "attention head size 36: cuDNN's fused attention needs a multiple of 8 up to 256");
  EXPECT_EQ(Attention::unsupported({2, 7, 4, 2, 264, 1056, 528}), "attention head size 264: cuDNN's fused attention needs a multiple of 8 up to 256");
  EXPECT_EQ(Attention::unsupported({2, 7, 6, 4, 64, 384, 256}), "attention heads: NH=6 is not a multiple of KVH=4");
  EXPECT_EQ(Attention::unsupported({2, 7, 4, 2, 64, 260, 64}),
            "attention row strides 260, 64, 260, 64: cuDNN needs 16-byte aligned rows (multiples of 8 elements)");
  EXPECT_EQ(Attention::unsupported({2, 8, 4, 2, 64, 256, 128, 4, 8, false, 260, 128}),
            "attention row strides 256, 128, 260, 128: cuDNN needs 16-byte aligned rows (multiples of 8 elements)");
  EXPECT_EQ(Attention::unsupported({2, 8, 4, 2, 64, 256, 128, 4, 8, true}),
            "attention block: a causal block has as many query rows as keys (its mask is top-left aligned)");
  EXPECT_EQ(Attention::unsupported({2, 8, 4, 2, 64, 256, 128, 4, 9, false}), "attention block: query rows and keys must be at most T");
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
