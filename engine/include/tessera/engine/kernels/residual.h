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

}  // namespace tessera::engine::kernels
