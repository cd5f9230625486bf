// Rotary position embedding in place (the GPU twin of ops/rope.h, same
// layout, same angles and rotation: elementwise_math.h): one (row, head, pair)
// per thread of a grid-stride loop; the angle t · theta^(−2i/D) and its cosine
// and sine in double, rounded to the compute type, as the CPU op does.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"
#include "tessera/planner/context_split.h"

namespace tessera::engine::kernels {

// x (B, Tn, row stride `stride`) holds H heads of HS at the start of each row;
// the first rotary_dim of each head rotate; `inverse` rotates back (backward).
// Under context parallelism a row's position is its token's in the whole sequence (`split`).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void rope_body(Ctx& ctx, T* x, int64_t B, int64_t Tn, int64_t H, int64_t HS, int64_t stride, int64_t rotary_dim, double theta,
                                   bool inverse, planner::ContextSplit split = {}) {
  using W = compute_t<T>;
  const int64_t half = rotary_dim / 2;
  grid_stride(ctx, B * Tn * H * half, [&](int64_t k) {
    const int64_t i = k % half, h = k / half % H, r = k / (half * H);
    const double angle = static_cast<double>(split.global_position(r % Tn, Tn)) * math::rope_inverse_frequency(theta, i, rotary_dim);
    const auto c = static_cast<W>(std::cos(angle)), s = static_cast<W>(inverse ? -std::sin(angle) : std::sin(angle));
    T* head = x + r * stride + h * HS;
    W a = widen(head[i]), b = widen(head[i + half]);
    math::rope_rotate_pair(a, b, c, s);
    head[i] = narrow<T>(a);
    head[i + half] = narrow<T>(b);
  });
}

}  // namespace tessera::engine::kernels
