// The residual connection (He et al. 2016): out += in, element by element,
// added in the compute type and rounded once into the stream's type.
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

}  // namespace tessera::engine::cpu
