// GELU (tanh) and SwiGLU forward and backward, the GPU twins of
// ops/activation.h with the same per-element functions (elementwise_math.h):
// one element per thread of a grid-stride loop, the same bits as the CPU op.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void gelu_forward_body(Ctx& ctx, T* out, const T* inp, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) { out[i] = narrow<T>(math::gelu(widen(inp[i]))); });
}

// dinp = gelu'(inp) · dout (overwrites).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void gelu_backward_body(Ctx& ctx, T* dinp, const T* inp, const T* dout, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) { dinp[i] = narrow<T>(math::gelu_grad(widen(inp[i])) * widen(dout[i])); });
}

template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void swiglu_forward_body(Ctx& ctx, T* out, const T* gate, const T* up, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) { out[i] = narrow<T>(math::silu(widen(gate[i])) * widen(up[i])); });
}

// dgate, dup (overwritten); dout may alias dup: each thread reads its element before writing it.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void swiglu_backward_body(Ctx& ctx, T* dgate, T* dup, const T* gate, const T* up, const T* dout, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) {
    const auto g = widen(gate[i]), dy = widen(dout[i]);
    dgate[i] = narrow<T>(math::silu_grad(g) * widen(up[i]) * dy);
    dup[i] = narrow<T>(math::silu(g) * dy);
  });
}

}  // namespace tessera::engine::kernels
