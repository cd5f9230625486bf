// Causal multi-head attention with grouped-query heads (Ainslie et al. 2023):
// NH query heads share KVH key/value heads, head h reading K/V head h / (NH / KVH).
// Unfused on purpose: forward keeps the softmax probabilities (B, NH, T, T) for
// backward, which is what the planner's `tessera` activation profile counts.
//   q (B, T, NH·HS) with row stride q_stride; k, v (B, T, KVH·HS) with kv_stride
//   out (B, T, NH·HS) contiguous; probs (B, NH, T, T)
// Backward overwrites dq, dk, dv (same strides as q, k, v).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace tessera::engine::cpu {

struct AttentionShape {
  int64_t B, T, NH, KVH, HS;
  int64_t q_stride, kv_stride;  // elements between consecutive tokens
};

template <typename T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, const AttentionShape& s) {
  const T scale = T(1) / std::sqrt(static_cast<T>(s.HS));
  const int64_t group = s.NH / s.KVH;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.NH; ++h) {
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < s.T; ++t) {
        const T* qt = q + (b * s.T + t) * s.q_stride + h * s.HS;
        T* p = probs + ((b * s.NH + h) * s.T + t) * s.T;
        T max_score = -std::numeric_limits<T>::infinity();
        for (int64_t u = 0; u <= t; ++u) {
          const T* ku = k + (b * s.T + u) * s.kv_stride + kvh * s.HS;
          T dot = 0;
          for (int64_t i = 0; i < s.HS; ++i) dot += qt[i] * ku[i];
          p[u] = dot * scale;
          if (p[u] > max_score) max_score = p[u];
        }
        T sum = 0;
        for (int64_t u = 0; u <= t; ++u) {
          p[u] = std::exp(p[u] - max_score);
          sum += p[u];
        }
        for (int64_t u = 0; u <= t; ++u) p[u] /= sum;
        for (int64_t u = t + 1; u < s.T; ++u) p[u] = 0;
        T* o = out + (b * s.T + t) * (s.NH * s.HS) + h * s.HS;
        for (int64_t i = 0; i < s.HS; ++i) o[i] = 0;
        for (int64_t u = 0; u <= t; ++u) {
          const T* vu = v + (b * s.T + u) * s.kv_stride + kvh * s.HS;
          for (int64_t i = 0; i < s.HS; ++i) o[i] += p[u] * vu[i];
        }
      }
    }
  }
}

// dP = dO · Vᵀ; dS = P ⊙ (dP − rowsum(dP ⊙ P)); dQ = dS · K · scale; dK = dSᵀ · Q · scale; dV = Pᵀ · dO.
// K/V heads shared by a group receive the sum of the group's gradients.
template <typename T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* probs, const AttentionShape& s) {
  const T scale = T(1) / std::sqrt(static_cast<T>(s.HS));
  const int64_t group = s.NH / s.KVH;
  for (int64_t r = 0; r < s.B * s.T; ++r) {
    for (int64_t i = 0; i < s.NH * s.HS; ++i) dq[r * s.q_stride + i] = 0;
    for (int64_t i = 0; i < s.KVH * s.HS; ++i) dk[r * s.kv_stride + i] = dv[r * s.kv_stride + i] = 0;
  }
  // Parallel over batch and K/V head: the heads of a group write the same dk/dv rows.
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t kvh = 0; kvh < s.KVH; ++kvh) {
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int64_t t = 0; t < s.T; ++t) {
          const T* p = probs + ((b * s.NH + h) * s.T + t) * s.T;
          const T* dot = dout + (b * s.T + t) * (s.NH * s.HS) + h * s.HS;
          const T* qt = q + (b * s.T + t) * s.q_stride + h * s.HS;
          T* dqt = dq + (b * s.T + t) * s.q_stride + h * s.HS;
          T weighted = 0;  // rowsum(dP ⊙ P)
          for (int64_t u = 0; u <= t; ++u) {
            const T* vu = v + (b * s.T + u) * s.kv_stride + kvh * s.HS;
            T dp = 0;
            for (int64_t i = 0; i < s.HS; ++i) dp += dot[i] * vu[i];
            weighted += dp * p[u];
          }
          for (int64_t u = 0; u <= t; ++u) {
            const int64_t row = (b * s.T + u) * s.kv_stride + kvh * s.HS;
            T dp = 0;
            for (int64_t i = 0; i < s.HS; ++i) dp += dot[i] * v[row + i];
            const T ds = p[u] * (dp - weighted) * scale;
            for (int64_t i = 0; i < s.HS; ++i) {
              dqt[i] += ds * k[row + i];
              dk[row + i] += ds * qt[i];
              dv[row + i] += p[u] * dot[i];
            }
          }
        }
      }
    }
  }
}

}  // namespace tessera::engine::cpu
