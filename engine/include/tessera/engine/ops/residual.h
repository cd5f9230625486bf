// The residual connection (He et al. 2016): out += in, element by element,
// added in the compute type and rounded once into the stream's type.
// add_rows' GPU twin: kernels/residual.h.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"

namespace tessera::engine::cpu {

template <typename T>
void add_in_place(T* out, const T* in, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(math::residual_sum(widen(out[i]), widen(in[i])));
}

// The same sum over rows [first, first + rows) of each of B samples of Tn
// rows, `width` values of each: dst's rows dst_stride apart, src's
// src_stride (ring attention adds a block's gradient share into a strided one).
template <typename T>
void add_rows(T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn, int64_t first, int64_t rows) {
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = first; t < first + rows; ++t) {
      T* d = dst + (b * Tn + t) * dst_stride;
      const T* x = src + (b * Tn + t) * src_stride;
      for (int64_t i = 0; i < width; ++i) d[i] = narrow<T>(math::residual_sum(widen(d[i]), widen(x[i])));
    }
  }
}

}  // namespace tessera::engine::cpu
