#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "tessera/engine/ops/activation.h"
#include "tessera/engine/ops/attention.h"
#include "tessera/engine/ops/cross_entropy.h"
#include "tessera/engine/ops/embedding.h"
#include "tessera/engine/ops/layernorm.h"
#include "tessera/engine/ops/linear.h"
#include "tessera/engine/ops/rope.h"

namespace tessera::engine::cpu {
namespace {

using testing::dot;
using testing::expect_gradient;
using testing::random_vector;
using Vec = std::vector<double>;

TEST(OpsGradcheck, LinearBothLayouts) {
  const int64_t N = 5, C = 4, OC = 3;
  MemoryLedger ledger;
  Workspace<double> workspace(ledger, N, 1, planner::Precision::fp32);
  for (WeightLayout layout : {WeightLayout::out_in, WeightLayout::in_out}) {
    Vec inp = random_vector(N * C, 1), w = random_vector(C * OC, 2), b = random_vector(OC, 3), r = random_vector(N * OC, 4);
    Vec out(N * OC), dinp(N * C), dw(C * OC, 0.0), db(OC, 0.0);
    auto loss = [&] {
      linear_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC, layout, workspace);
      return dot(out, r);
    };
    loss();
    linear_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), N, C, OC, layout, workspace);
    expect_gradient("linear dinp", inp, dinp, loss);
    expect_gradient("linear dweight", w, dw, loss);
    expect_gradient("linear dbias", b, db, loss);
  }
}

TEST(OpsGradcheck, LayerNormAndRmsNorm) {
  const int64_t N = 4, C = 6;
  Vec inp = random_vector(N * C, 5), w = random_vector(C, 6), b = random_vector(C, 7), r = random_vector(N * C, 8);
  Vec out(N * C), mean(N), rstd(N), dinp(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  auto ln = [&] {
    layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w.data(), b.data(), N, C, 1e-5);
    return dot(out, r);
  };
  ln();
  layernorm_backward(dinp.data(), dw.data(), db.data(), r.data(), inp.data(), w.data(), mean.data(), rstd.data(), N, C);
  expect_gradient("layernorm dinp", inp, dinp, ln);
  expect_gradient("layernorm dweight", w, dw, ln);
  expect_gradient("layernorm dbias", b, db, ln);

  Vec rms_dw(C, 0.0);
  std::fill(dinp.begin(), dinp.end(), 0.0);  // norm backward accumulates into dinp
  auto rms = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-5);
    return dot(out, r);
  };
  rms();
  rmsnorm_backward(dinp.data(), rms_dw.data(), r.data(), inp.data(), w.data(), rstd.data(), N, C);
  expect_gradient("rmsnorm dinp", inp, dinp, rms);
  expect_gradient("rmsnorm dweight", w, rms_dw, rms);
}

TEST(OpsGradcheck, GeluAndSwiglu) {
  const int64_t n = 16;
  Vec x = random_vector(n, 9, 2.0), up = random_vector(n, 10), r = random_vector(n, 11), out(n), dx(n), dup(n);
  auto gelu = [&] {
    gelu_forward(out.data(), x.data(), n);
    return dot(out, r);
  };
  gelu_backward(dx.data(), x.data(), r.data(), n);
  expect_gradient("gelu", x, dx, gelu);
  auto swiglu = [&] {
    swiglu_forward(out.data(), x.data(), up.data(), n);
    return dot(out, r);
  };
  swiglu_backward(dx.data(), dup.data(), x.data(), up.data(), r.data(), n);
  expect_gradient("swiglu dgate", x, dx, swiglu);
  expect_gradient("swiglu dup", up, dup, swiglu);
}

// Attention over q, k, v interleaved in one row as in a fused QKV, loss = Σ out ⊙ R.
struct AttentionCase {
  AttentionShape s;
  Vec qkv, r, out, lse, dqkv;
  MemoryLedger ledger;
  Workspace<double> workspace;

  explicit AttentionCase(int64_t B, int64_t T, int64_t NH, int64_t KVH, int64_t HS)
      : s{B, T, NH, KVH, HS, (NH + 2 * KVH) * HS, (NH + 2 * KVH) * HS},
        qkv(random_vector(B * T * s.q_stride, 12)),
        r(random_vector(B * T * NH * HS, 13)),
        out(B * T * NH * HS),
        lse(B * NH * T),
        dqkv(B * T * s.q_stride),
        workspace(ledger, T, HS, planner::Precision::fp32) {}
  const double* k() const { return qkv.data() + s.NH * s.HS; }
  const double* v() const { return k() + s.KVH * s.HS; }
  double loss() {
    attention_forward(out.data(), lse.data(), qkv.data(), k(), v(), s, workspace);
    return dot(out, r);
  }
  void backward() {
    loss();
    attention_backward(dqkv.data(), dqkv.data() + s.NH * s.HS, dqkv.data() + (s.NH + s.KVH) * s.HS, r.data(), qkv.data(), k(), v(),
                       out.data(), lse.data(), s, workspace);
  }
};

// Awkward sizes for a blockwise kernel: one token, fewer tokens than a block,
// exactly one block, one block and a ragged one, three blocks ending in a
// single row; multi-head, grouped-query (2 and 4 heads per K/V head).
TEST(OpsGradcheck, CausalAttentionAtBlockEdgesAndGroupedQueries) {
  constexpr int64_t kBlock = planner::kAttentionBlock;
  struct Size {
    int64_t B, T, NH, KVH, HS;
  };
  for (Size z : {Size{2, 1, 4, 2, 3}, Size{2, 5, 4, 2, 3}, Size{1, kBlock, 2, 2, 2}, Size{1, kBlock + 3, 4, 1, 2}, Size{1, 2 * kBlock + 1, 2, 1, 2}}) {
    AttentionCase c(z.B, z.T, z.NH, z.KVH, z.HS);
    c.backward();
    expect_gradient("attention dqkv at T = " + std::to_string(z.T) + ", " + std::to_string(z.NH) + " heads over " + std::to_string(z.KVH), c.qkv,
                    c.dqkv, [&] { return c.loss(); }, 1e-6, 300);
  }
}

// The blockwise forward equals softmax(mask(scale · q kᵀ)) v written out
// directly, and its log-sum-exp is log Σ exp of the same scores.
TEST(OpsGradcheck, FlashAttentionMatchesTheDirectSoftmax) {
  constexpr int64_t kBlock = planner::kAttentionBlock;
  for (int64_t T : {int64_t{1}, int64_t{7}, kBlock + 3, 2 * kBlock + 1}) {
    AttentionCase c(2, T, 4, 2, 5);
    c.loss();
    const AttentionShape& s = c.s;
    double worst_out = 0, worst_lse = 0;
    for (int64_t b = 0; b < s.B; ++b) {
      for (int64_t h = 0; h < s.NH; ++h) {
        const int64_t kvh = h / (s.NH / s.KVH);
        for (int64_t t = 0; t < T; ++t) {
          const double* q = c.qkv.data() + (b * T + t) * s.q_stride + h * s.HS;
          std::vector<double> scores(static_cast<size_t>(t + 1));
          for (int64_t u = 0; u <= t; ++u) {
            const double* key = c.k() + (b * T + u) * s.kv_stride + kvh * s.HS;
            double dot_product = 0;
            for (int64_t d = 0; d < s.HS; ++d) dot_product += q[d] * key[d];
            scores[static_cast<size_t>(u)] = dot_product / std::sqrt(static_cast<double>(s.HS));
          }
          double sum = 0;
          for (double x : scores) sum += std::exp(x);
          worst_lse = std::max(worst_lse, std::abs(std::log(sum) - c.lse[static_cast<size_t>((b * s.NH + h) * T + t)]));
          for (int64_t d = 0; d < s.HS; ++d) {
            double expected = 0;
            for (int64_t u = 0; u <= t; ++u) expected += std::exp(scores[static_cast<size_t>(u)]) / sum * c.v()[(b * T + u) * s.kv_stride + kvh * s.HS + d];
            worst_out = std::max(worst_out, std::abs(expected - c.out[static_cast<size_t>((b * T + t) * s.NH * s.HS + h * s.HS + d)]));
          }
        }
      }
    }
    EXPECT_LT(worst_out, 1e-12) << "T = " << T;
    EXPECT_LT(worst_lse, 1e-12) << "T = " << T;
  }
}

TEST(OpsGradcheck, EmbeddingWithPositions) {
  const int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<int32_t> tokens = {1, 4, 1, 0, 2, 4};
  Vec wte = random_vector(V * C, 14), wpe = random_vector(T * C, 15), r = random_vector(B * T * C, 16), out(B * T * C);
  Vec dwte(V * C, 0.0), dwpe(T * C, 0.0);
  auto loss = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), B, T, C);
    position_embedding_forward(out.data(), wpe.data(), B * T, T, C);
    return dot(out, r);
  };
  embedding_backward(dwte.data(), r.data(), tokens.data(), B, T, C);
  position_embedding_backward(dwpe.data(), r.data(), B, T, C);
  expect_gradient("embedding dwte", wte, dwte, loss);
  expect_gradient("embedding dwpe", wpe, dwpe, loss);
}

TEST(OpsGradcheck, CrossEntropyMeanLoss) {
  const int64_t N = 4, V = 7;
  const std::vector<int32_t> targets = {0, 6, 3, 3};
  Vec logits = random_vector(N * V, 17), work(N * V), losses(N);
  auto loss = [&] {
    work = logits;
    cross_entropy_forward(losses.data(), work.data(), targets.data(), N, V);
    double mean = 0;
    for (double l : losses) mean += l / N;
    return mean;
  };
  loss();
  cross_entropy_backward(work.data(), targets.data(), N, V, 1.0 / N);
  const Vec dlogits = work;  // loss() below reuses the work buffer
  expect_gradient("cross entropy dlogits", logits, dlogits, loss);
}

TEST(OpsGradcheck, RopeBackwardIsTheInverseRotation) {
  const int64_t B = 1, T = 4, H = 2, HS = 6, rotary = 4;
  Vec x = random_vector(B * T * H * HS, 18), r = random_vector(B * T * H * HS, 19);
  auto loss = [&] {
    Vec y = x;
    rope_rotate(y.data(), B, T, H, HS, H * HS, rotary, 10000.0, false);
    return dot(y, r);
  };
  Vec dx = r;  // the gradient of a rotation is the inverse rotation of dout
  rope_rotate(dx.data(), B, T, H, HS, H * HS, rotary, 10000.0, true);
  expect_gradient("rope", x, dx, loss);
}

}  // namespace
}  // namespace tessera::engine::cpu
