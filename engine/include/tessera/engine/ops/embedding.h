// Token embedding plus an optional learned position table (GPT-2):
// out (B, T, C) = wte[tokens] + wpe[t]. Backward accumulates into dwte, dwpe.
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"

namespace tessera::engine::cpu {

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t B, int64_t Tn, int64_t C) {
#pragma omp parallel for
  for (int64_t r = 0; r < B * Tn; ++r) {
    const T* e = wte + static_cast<int64_t>(tokens[r]) * C;
    const T* p = wpe ? wpe + (r % Tn) * C : nullptr;
    for (int64_t i = 0; i < C; ++i) out[r * C + i] = narrow<T>(widen(e[i]) + (p ? widen(p[i]) : compute_t<T>(0)));
  }
}

// Serial: two positions may hold the same token, and the sum must not depend on threads.
template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn, int64_t C) {
  for (int64_t r = 0; r < B * Tn; ++r) {
    T* e = dwte + static_cast<int64_t>(tokens[r]) * C;
    T* p = dwpe ? dwpe + (r % Tn) * C : nullptr;
    for (int64_t i = 0; i < C; ++i) {
      e[i] = narrow<T>(widen(e[i]) + widen(dout[r * C + i]));
      if (p) p[i] = narrow<T>(widen(p[i]) + widen(dout[r * C + i]));
    }
  }
}

}  // namespace tessera::engine::cpu
