#include <gtest/gtest.h>

#include <algorithm>

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
  Workspace<double> workspace(ledger, N, planner::Precision::fp32);
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

TEST(OpsGradcheck, CausalAttentionWithGroupedQueries) {
  // 4 query heads sharing 2 K/V heads; q, k, v interleaved in one row as in a fused QKV.
  const AttentionShape s{2, 5, 4, 2, 3, 4 * 3 + 2 * 2 * 3, 4 * 3 + 2 * 2 * 3};
  const int64_t rows = s.B * s.T, width = s.q_stride;
  Vec qkv = random_vector(rows * width, 12), r = random_vector(rows * s.NH * s.HS, 13);
  Vec out(rows * s.NH * s.HS), probs(s.B * s.NH * s.T * s.T), dqkv(rows * width);
  MemoryLedger ledger;
  Workspace<double> workspace(ledger, s.T, planner::Precision::fp32);
  auto loss = [&] {
    attention_forward(out.data(), probs.data(), qkv.data(), qkv.data() + s.NH * s.HS, qkv.data() + (s.NH + s.KVH) * s.HS, s, workspace);
    return dot(out, r);
  };
  loss();
  attention_backward(dqkv.data(), dqkv.data() + s.NH * s.HS, dqkv.data() + (s.NH + s.KVH) * s.HS, r.data(), qkv.data(),
                     qkv.data() + s.NH * s.HS, qkv.data() + (s.NH + s.KVH) * s.HS, probs.data(), s, workspace);
  expect_gradient("attention dqkv", qkv, dqkv, loss);
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
