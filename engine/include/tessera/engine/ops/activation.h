// The MLP's element-wise activations: GELU (GPT-2, OPT's ReLU is not used by the
// families Tessera trains) and SwiGLU's silu(gate) · up (Shazeer 2020).
// Backward overwrites the input gradients.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"

namespace tessera::engine::cpu {

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = math::gelu(inp[i]);
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) dinp[i] = math::gelu_grad(inp[i]) * dout[i];
}

template <typename T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) out[i] = math::silu(gate[i]) * up[i];
}

template <typename T>
void swiglu_backward(T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    dgate[i] = math::silu_grad(gate[i]) * up[i] * dout[i];
    dup[i] = math::silu(gate[i]) * dout[i];
  }
}

}  // namespace tessera::engine::cpu
