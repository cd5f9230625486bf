// The MLP's element-wise activations: GELU (GPT-2, OPT's ReLU is not used by the
// families Tessera trains) and SwiGLU's silu(gate) · up (Shazeer 2020).
// Backward overwrites the input gradients.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"

namespace tessera::engine::cpu {

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(math::gelu(widen(inp[i])));
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) dinp[i] = narrow<T>(math::gelu_grad(widen(inp[i])) * widen(dout[i]));
}

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = narrow<T>(math::silu(widen(gate[i])) * widen(up[i]));
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const auto g = widen(gate[i]), dy = widen(dout[i]);  // dout may alias dup: read before writing
    dgate[i] = narrow<T>(math::silu_grad(g) * widen(up[i]) * dy);
    dup[i] = narrow<T>(math::silu(g) * dy);
  }
}

}  // namespace tessera::engine::cpu
