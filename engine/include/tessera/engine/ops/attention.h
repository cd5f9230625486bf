// Causal multi-head attention with grouped-query heads (Ainslie et al. 2023):
// NH query heads share KVH key/value heads, head h reading K/V head h / (NH / KVH).
// FlashAttention-2's formulation (Dao 2023, "FlashAttention-2: Faster Attention
// with Better Parallelism and Work Partitioning", arXiv:2307.08691, Algorithms
// 1 and 2), on the CPU: no T × T matrix exists. Forward walks the key/value
// blocks of each query block with an online softmax (a running row maximum m
// and sum ℓ) and keeps, besides the output, one log-sum-exp L = m + log ℓ per
// query row and head: what the planner's `tessera` profile counts
// (attention_lse). Backward recomputes each block's probabilities
// P = exp(scale · Q Kᵀ − L) from Q, K and L. Causal: blocks wholly above the
// diagonal are skipped, and inside a diagonal block the later keys are masked.
//   q (B, T, NH·HS) with row stride q_stride; k, v (B, T, KVH·HS) with kv_stride
//   out (B, T, NH·HS) contiguous; lse (B, NH, T) in the compute type
// The blocks live in the calling thread's workspace (planner::AttentionScratch).
// Backward overwrites dq, dk, dv (same strides as q, k, v unless the shape
// gives their own).
// Ring attention (model/ring_attention.h) runs the same loops on one block of
// queries against one block of keys: fewer query rows or keys than T, and
// either causal or every key visible to every query.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessera/engine/ops/gemm.h"

namespace tessera::engine::cpu {

struct AttentionShape {
  int64_t B, T, NH, KVH, HS;
  int64_t q_stride, kv_stride;  // elements between consecutive tokens
  // One block of ring attention: `query_rows` queries and `key_rows` keys per
  // sample (0: T; a sample's rows still lie T tokens apart, and lse's T
  // entries), masked causally or not at all; dq and dk, dv rows `dq_stride`
  // and `dkv_stride` apart (0: q_stride, kv_stride).
  int64_t query_rows = 0, key_rows = 0;
  bool causal = true;
  int64_t dq_stride = 0, dkv_stride = 0;
  int64_t queries() const { return query_rows > 0 ? query_rows : T; }
  int64_t keys() const { return key_rows > 0 ? key_rows : T; }
  int64_t dq_rows_apart() const { return dq_stride > 0 ? dq_stride : q_stride; }
  int64_t dkv_rows_apart() const { return dkv_stride > 0 ? dkv_stride : kv_stride; }
};

namespace attention_detail {

constexpr int64_t kBlock = planner::kAttentionBlock;

// rows × HS values of one head, row after row `stride` apart, in the compute
// type: the head's own memory when it is stored in the compute type, else
// widened into `block`, so every product below is one BLAS call.
template <typename W>
struct Rows {
  const W* data;
  int64_t ld;
};

template <typename W, typename T>
Rows<W> compute_rows(const T* first, int64_t stride, int64_t rows, int64_t HS, W* block) {
  if constexpr (std::is_same_v<T, W>) {
    return {first, stride};
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t d = 0; d < HS; ++d) block[r * HS + d] = widen(first[r * stride + d]);
    }
    return {block, HS};
  }
}

// Keys of the block starting at key c0 (cols of them) that query t may see.
inline int64_t visible_keys(const AttentionShape& s, int64_t t, int64_t c0, int64_t cols) {
  return s.causal ? std::min(cols, t - c0 + 1) : cols;
}

}  // namespace attention_detail

// Algorithm 1 per (sample, head), query block by query block: for each key
// block up to the diagonal, S = scale · Qᵢ Kⱼᵀ; m' = max(m, rowmax S);
// P = exp(S − m'); ℓ = e^(m − m') ℓ + rowsum P; Õ = e^(m − m') Õ + P Vⱼ. Then
// O = Õ / ℓ and L = m + log ℓ. Õ accumulates in the compute type, so 16-bit
// outputs are rounded once.
template <typename T>
void attention_forward(T* out, compute_t<T>* lse, const T* q, const T* k, const T* v, const AttentionShape& s,
                       Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  using namespace attention_detail;
  const W scale = W(1) / std::sqrt(static_cast<W>(s.HS));
  const int64_t group = s.NH / s.KVH;
  const int64_t out_stride = s.NH * s.HS;
  const planner::AttentionScratch& at = workspace.attention_layout();
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.NH; ++h) {
      W* scratch = workspace.attention_scratch();
      W* scores = scratch + at.scores();
      W* acc = scratch + at.out();
      W* row_max = scratch + at.row_max();
      W* row_sum = scratch + at.row_sum();
      const int64_t kvh = h / group;
      const T* qh = q + b * s.T * s.q_stride + h * s.HS;
      const T* kh = k + b * s.T * s.kv_stride + kvh * s.HS;
      const T* vh = v + b * s.T * s.kv_stride + kvh * s.HS;
      T* oh = out + b * s.T * out_stride + h * s.HS;
      W* lseh = lse + (b * s.NH + h) * s.T;
      const int64_t queries = s.queries(), keys = s.keys();
      for (int64_t r0 = 0; r0 < queries; r0 += kBlock) {
        const int64_t rows = std::min(kBlock, queries - r0);
        const Rows<W> qi = compute_rows(qh + r0 * s.q_stride, s.q_stride, rows, s.HS, scratch + at.q());
        std::fill(row_max, row_max + rows, -std::numeric_limits<W>::infinity());
        std::fill(row_sum, row_sum + rows, W(0));
        std::fill(acc, acc + rows * s.HS, W(0));
        const int64_t key_end = s.causal ? r0 + rows : keys;  // causal: the key blocks up to the diagonal
        for (int64_t c0 = 0; c0 < key_end; c0 += kBlock) {
          const int64_t cols = std::min(kBlock, keys - c0);
          const Rows<W> kj = compute_rows(kh + c0 * s.kv_stride, s.kv_stride, cols, s.HS, scratch + at.k());
          const Rows<W> vj = compute_rows(vh + c0 * s.kv_stride, s.kv_stride, cols, s.HS, scratch + at.v());
          blas_gemm(GemmShape{false, true, rows, cols, s.HS, qi.ld, kj.ld, kBlock}, scale, qi.data, kj.data, W(0), scores);
          for (int64_t r = 0; r < rows; ++r) {
            W* row = scores + r * kBlock;
            const int64_t visible = visible_keys(s, r0 + r, c0, cols);
            W new_max = row_max[r];
            for (int64_t u = 0; u < visible; ++u) new_max = std::max(new_max, row[u]);
            W sum = 0;
            for (int64_t u = 0; u < visible; ++u) {
              row[u] = std::exp(row[u] - new_max);
              sum += row[u];
            }
            std::fill(row + visible, row + cols, W(0));
            const W correction = std::exp(row_max[r] - new_max);  // 0 on the first block, where m = −∞
            row_sum[r] = row_sum[r] * correction + sum;
            row_max[r] = new_max;
            if (correction != W(1)) {
              for (int64_t d = 0; d < s.HS; ++d) acc[r * s.HS + d] *= correction;
            }
          }
          blas_gemm(GemmShape{false, false, rows, s.HS, cols, kBlock, vj.ld, s.HS}, W(1), scores, vj.data, W(1), acc);
        }
        for (int64_t r = 0; r < rows; ++r) {
          const W inverse = W(1) / row_sum[r];
          for (int64_t d = 0; d < s.HS; ++d) oh[(r0 + r) * out_stride + d] = narrow<T>(acc[r * s.HS + d] * inverse);
          lseh[r0 + r] = row_max[r] + std::log(row_sum[r]);
        }
      }
    }
  }
}

// Algorithm 2 per (sample, K/V head), key block by key block: D = rowsum(dO ∘ O)
// once per head; then for each query block from the diagonal down,
// P = exp(scale · Qᵢ Kⱼᵀ − L); dVⱼ += Pᵀ dOᵢ; dP = dOᵢ Vⱼᵀ; dS = P ∘ (dP − D);
// dQᵢ += scale · dS Kⱼ; dKⱼ += scale · dSᵀ Qᵢ. dKⱼ and dVⱼ accumulate in the
// compute type over a key block's query blocks, dQ over one head's key blocks
// (the workspace's seq_len × head_dim accumulator). K/V heads shared by a
// group receive the sum of the group's gradients, so the loop runs over K/V
// heads (a thread owns their dk, dv rows) and the group's heads inside.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const compute_t<T>* lse,
                        const AttentionShape& s, Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  using namespace attention_detail;
  const W scale = W(1) / std::sqrt(static_cast<W>(s.HS));
  const int64_t group = s.NH / s.KVH;
  const int64_t out_stride = s.NH * s.HS;
  const planner::AttentionScratch& at = workspace.attention_layout();
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t kvh = 0; kvh < s.KVH; ++kvh) {
      W* scratch = workspace.attention_scratch();
      W* probs = scratch + at.scores();
      W* dscores = scratch + at.dscores();
      W* dk_acc = scratch + at.dk();
      W* dv_acc = scratch + at.dv();
      W* dq_acc = scratch + at.dq();
      W* delta = scratch + at.delta();
      const int64_t queries = s.queries(), keys = s.keys(), dq_stride = s.dq_rows_apart(), dkv_stride = s.dkv_rows_apart();
      const T* kh = k + b * s.T * s.kv_stride + kvh * s.HS;
      const T* vh = v + b * s.T * s.kv_stride + kvh * s.HS;
      T* dkh = dk + b * s.T * dkv_stride + kvh * s.HS;
      T* dvh = dv + b * s.T * dkv_stride + kvh * s.HS;
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const bool first = h == kvh * group;  // the group's first head overwrites dk, dv; the others add
        const T* qh = q + b * s.T * s.q_stride + h * s.HS;
        const T* doh = dout + b * s.T * out_stride + h * s.HS;
        const T* oh = out + b * s.T * out_stride + h * s.HS;
        const W* lseh = lse + (b * s.NH + h) * s.T;
        T* dqh = dq + b * s.T * dq_stride + h * s.HS;
        for (int64_t t = 0; t < queries; ++t) {
          W sum = 0;
          for (int64_t d = 0; d < s.HS; ++d) sum += widen(doh[t * out_stride + d]) * widen(oh[t * out_stride + d]);
          delta[t] = sum;
        }
        std::fill(dq_acc, dq_acc + queries * s.HS, W(0));
        for (int64_t c0 = 0; c0 < keys; c0 += kBlock) {
          const int64_t cols = std::min(kBlock, keys - c0);
          const Rows<W> kj = compute_rows(kh + c0 * s.kv_stride, s.kv_stride, cols, s.HS, scratch + at.k());
          const Rows<W> vj = compute_rows(vh + c0 * s.kv_stride, s.kv_stride, cols, s.HS, scratch + at.v());
          std::fill(dk_acc, dk_acc + cols * s.HS, W(0));
          std::fill(dv_acc, dv_acc + cols * s.HS, W(0));
          for (int64_t r0 = s.causal ? c0 : 0; r0 < queries; r0 += kBlock) {  // causal: the query blocks from the diagonal down
            const int64_t rows = std::min(kBlock, queries - r0);
            const Rows<W> qi = compute_rows(qh + r0 * s.q_stride, s.q_stride, rows, s.HS, scratch + at.q());
            const Rows<W> doi = compute_rows(doh + r0 * out_stride, out_stride, rows, s.HS, scratch + at.dout());
            blas_gemm(GemmShape{false, true, rows, cols, s.HS, qi.ld, kj.ld, kBlock}, scale, qi.data, kj.data, W(0), probs);
            for (int64_t r = 0; r < rows; ++r) {
              W* row = probs + r * kBlock;
              const int64_t visible = visible_keys(s, r0 + r, c0, cols);
              for (int64_t u = 0; u < visible; ++u) row[u] = std::exp(row[u] - lseh[r0 + r]);
              std::fill(row + visible, row + cols, W(0));
            }
            blas_gemm(GemmShape{true, false, cols, s.HS, rows, kBlock, doi.ld, s.HS}, W(1), probs, doi.data, W(1), dv_acc);
            blas_gemm(GemmShape{false, true, rows, cols, s.HS, doi.ld, vj.ld, kBlock}, W(1), doi.data, vj.data, W(0), dscores);
            for (int64_t r = 0; r < rows; ++r) {
              const W* p = probs + r * kBlock;
              W* ds = dscores + r * kBlock;
              for (int64_t u = 0; u < cols; ++u) ds[u] = p[u] * (ds[u] - delta[r0 + r]);
            }
            blas_gemm(GemmShape{false, false, rows, s.HS, cols, kBlock, kj.ld, s.HS}, scale, dscores, kj.data, W(1), dq_acc + r0 * s.HS);
            blas_gemm(GemmShape{true, false, cols, s.HS, rows, kBlock, qi.ld, s.HS}, scale, dscores, qi.data, W(1), dk_acc);
          }
          for (int64_t u = 0; u < cols; ++u) {
            for (int64_t d = 0; d < s.HS; ++d) {
              T& dk_value = dkh[(c0 + u) * dkv_stride + d];
              T& dv_value = dvh[(c0 + u) * dkv_stride + d];
              dk_value = narrow<T>(dk_acc[u * s.HS + d] + (first ? W(0) : widen(dk_value)));
              dv_value = narrow<T>(dv_acc[u * s.HS + d] + (first ? W(0) : widen(dv_value)));
            }
          }
        }
        for (int64_t t = 0; t < queries; ++t) {
          for (int64_t d = 0; d < s.HS; ++d) dqh[t * dq_stride + d] = narrow<T>(dq_acc[t * s.HS + d]);
        }
      }
    }
  }
}

}  // namespace tessera::engine::cpu
