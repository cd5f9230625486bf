// The residual connection out += in (the GPU twin of ops/residual.h, same
// per-element sum): one element per thread of a grid-stride loop. `in` may be
// narrower than `out` (FSDP adds a reduced bf16 gradient into its fp32 shard).
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

template <typename Ctx, typename T, typename In>
TESSERA_KERNEL_BODY void residual_add_body(Ctx& ctx, T* out, const In* in, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) { out[i] = narrow<T>(math::residual_sum(widen(out[i]), widen(in[i]))); });
}

// ops/residual.h's add_rows: one element per thread of a grid-stride loop
// over the B · rows · width values.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void add_rows_body(Ctx& ctx, T* dst, int64_t dst_stride, const T* src, int64_t src_stride, int64_t width, int64_t B, int64_t Tn,
                                       int64_t first, int64_t rows) {
  grid_stride(ctx, B * rows * width, [&](int64_t i) {
    const int64_t col = i % width, t = first + (i / width) % rows, b = i / (width * rows);
    T& d = dst[(b * Tn + t) * dst_stride + col];
    d = narrow<T>(math::residual_sum(widen(d), widen(src[(b * Tn + t) * src_stride + col])));
  });
}

}  // namespace tessera::engine::kernels
