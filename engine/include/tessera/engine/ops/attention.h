// Causal multi-head attention with grouped-query heads (Ainslie et al. 2023):
// NH query heads share KVH key/value heads, head h reading K/V head h / (NH / KVH).
// Unfused on purpose: forward keeps the softmax probabilities (B, NH, T, T) for
// backward, which is what the planner's `tessera` activation profile counts.
//   q (B, T, NH·HS) with row stride q_stride; k, v (B, T, KVH·HS) with kv_stride
//   out (B, T, NH·HS) contiguous; probs (B, NH, T, T)
// Backward overwrites dq, dk, dv (same strides as q, k, v) and uses the
// probabilities' buffer and the workspace's attention rows as its working space.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tessera/engine/ops/gemm.h"

namespace tessera::engine::cpu {

struct AttentionShape {
  int64_t B, T, NH, KVH, HS;
  int64_t q_stride, kv_stride;  // elements between consecutive tokens
};

// Per (sample, head): P = softmax(mask(scale · Q Kᵀ)) and O = P V, as GEMMs
// (the masked upper triangle of P is zeroed).
template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const AttentionShape& s, Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  const W scale = W(1) / std::sqrt(static_cast<W>(s.HS));
  const int64_t group = s.NH / s.KVH;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.NH; ++h) {
      const int64_t kvh = h / group;
      const T* qh = q + b * s.T * s.q_stride + h * s.HS;
      const T* kh = k + b * s.T * s.kv_stride + kvh * s.HS;
      const T* vh = v + b * s.T * s.kv_stride + kvh * s.HS;
      T* p = probs + (b * s.NH + h) * s.T * s.T;
      // Scores are formed kRows rows at a time in the compute type, so 16-bit
      // probabilities are rounded once, after the softmax. Causal: row t needs keys 0..t.
      constexpr int64_t kRows = planner::kAttentionRows;
      W* scores = workspace.attention_rows();
      for (int64_t first_row = 0; first_row < s.T; first_row += kRows) {
        const int64_t rows = std::min(kRows, s.T - first_row);
        gemm(false, true, rows, first_row + rows, s.HS, scale, qh + first_row * s.q_stride, s.q_stride, kh, s.kv_stride, W(0), scores, s.T,
             workspace);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t t = first_row + r;
          W* row = scores + r * s.T;
          T* prob = p + t * s.T;
          W max_score = -std::numeric_limits<W>::infinity();
          for (int64_t u = 0; u <= t; ++u) max_score = std::max(max_score, row[u]);
          W sum = 0;
          for (int64_t u = 0; u <= t; ++u) {
            row[u] = std::exp(row[u] - max_score);
            sum += row[u];
          }
          for (int64_t u = 0; u <= t; ++u) prob[u] = narrow<T>(row[u] / sum);
          for (int64_t u = t + 1; u < s.T; ++u) prob[u] = narrow<T>(W(0));
        }
      }
      gemm(false, false, s.T, s.HS, s.T, W(1), p, s.T, vh, s.kv_stride, W(0), out + b * s.T * (s.NH * s.HS) + h * s.HS, s.NH * s.HS, workspace);
    }
  }
}

// dV = Pᵀ dO; dP = dO Vᵀ; dS = P ⊙ (dP − rowsum(dP ⊙ P)); dQ = scale · dS K; dK = scale · dSᵀ Q.
// dS is written over P row by row (P is not needed after this block's
// backward), so backward needs no T × T buffer of its own. K/V heads shared by
// a group receive the sum of the group's gradients.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, T* probs, const AttentionShape& s,
                        Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  const W scale = W(1) / std::sqrt(static_cast<W>(s.HS));
  const int64_t group = s.NH / s.KVH;
  const int64_t out_stride = s.NH * s.HS;
  // Parallel over sample and K/V head: the heads of a group write the same dk/dv rows.
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t kvh = 0; kvh < s.KVH; ++kvh) {
      constexpr int64_t kRows = planner::kAttentionRows;  // dP is formed kRows rows at a time: a GEMM, with an O(T) buffer
      W* dp = workspace.attention_rows();
      const T* kh = k + b * s.T * s.kv_stride + kvh * s.HS;
      const T* vh = v + b * s.T * s.kv_stride + kvh * s.HS;
      T* dkh = dk + b * s.T * s.kv_stride + kvh * s.HS;
      T* dvh = dv + b * s.T * s.kv_stride + kvh * s.HS;
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        const W first = h == kvh * group ? W(0) : W(1);  // the group's first head overwrites dk, dv; the others add
        const T* qh = q + b * s.T * s.q_stride + h * s.HS;
        const T* doh = dout + b * s.T * out_stride + h * s.HS;
        T* dqh = dq + b * s.T * s.q_stride + h * s.HS;
        T* p = probs + (b * s.NH + h) * s.T * s.T;
        gemm(true, false, s.T, s.HS, s.T, W(1), p, s.T, doh, out_stride, first, dvh, s.kv_stride, workspace);
        for (int64_t first_row = 0; first_row < s.T; first_row += kRows) {
          const int64_t rows = std::min(kRows, s.T - first_row);
          const int64_t columns = first_row + rows;  // causal: later columns are zero in P
          gemm(false, true, rows, columns, s.HS, W(1), doh + first_row * out_stride, out_stride, vh, s.kv_stride, W(0), dp, s.T, workspace);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = first_row + r;
            T* row = p + t * s.T;
            const W* dprow = dp + r * s.T;
            W weighted = 0;
            for (int64_t u = 0; u <= t; ++u) weighted += dprow[u] * widen(row[u]);
            for (int64_t u = 0; u <= t; ++u) row[u] = narrow<T>(widen(row[u]) * (dprow[u] - weighted));
          }
        }
        gemm(false, false, s.T, s.HS, s.T, scale, p, s.T, kh, s.kv_stride, W(0), dqh, s.q_stride, workspace);
        gemm(true, false, s.T, s.HS, s.T, scale, p, s.T, qh, s.q_stride, first, dkh, s.kv_stride, workspace);
      }
    }
  }
}

}  // namespace tessera::engine::cpu
