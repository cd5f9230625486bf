// Rotary position embedding (Su et al. 2021) in the "rotate half" layout of
// Hugging Face's Llama: within each head, element i (i < D/2) pairs with
// i + D/2, where D = rotary_dim ≤ HS (GPT-NeoX rotates the first rotary_pct of
// a head); angle = t · theta^(−2i/D). Applied in place to x (B, T, H·HS) with
// row stride `stride`. Backward is the inverse rotation of the gradient.
// Under context parallelism t is the token's position in the whole sequence
// (`split`: which chunks of it the Tn local tokens are).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine::cpu {

template <typename T>
void rope_rotate(T* x, int64_t B, int64_t Tn, int64_t H, int64_t HS, int64_t stride, int64_t rotary_dim, double theta, bool inverse,
                 const planner::ContextSplit& split = {}) {
  const int64_t half = rotary_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[static_cast<size_t>(i)] = math::rope_inverse_frequency(theta, i, rotary_dim);
#pragma omp parallel for
  for (int64_t r = 0; r < B * Tn; ++r) {
    const auto t = static_cast<double>(split.global_position(r % Tn, Tn));
    std::vector<compute_t<T>> cosines(static_cast<size_t>(half)), sines(static_cast<size_t>(half));  // one row's angles, shared by its heads
    for (int64_t i = 0; i < half; ++i) {
      const double angle = t * inv_freq[static_cast<size_t>(i)];
      cosines[static_cast<size_t>(i)] = static_cast<compute_t<T>>(std::cos(angle));
      sines[static_cast<size_t>(i)] = static_cast<compute_t<T>>(inverse ? -std::sin(angle) : std::sin(angle));
    }
    for (int64_t h = 0; h < H; ++h) {
      T* head = x + r * stride + h * HS;
      for (int64_t i = 0; i < half; ++i) {
        const auto c = cosines[static_cast<size_t>(i)], s = sines[static_cast<size_t>(i)];
        auto a = widen(head[i]), b = widen(head[i + half]);
        math::rope_rotate_pair(a, b, c, s);
        head[i] = narrow<T>(a);
        head[i + half] = narrow<T>(b);
      }
    }
  }
}

}  // namespace tessera::engine::cpu
