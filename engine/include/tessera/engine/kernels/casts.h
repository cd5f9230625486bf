// Casts between fp32 and the 16-bit storage types (half.h's rounding to
// nearest even, the conversions the CPU backend uses everywhere): one element
// per thread of a grid-stride loop.
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

// out (n) = in (n) converted: From and To among float, bf16, fp16.
template <typename Ctx, typename To, typename From>
TESSERA_KERNEL_BODY void cast_body(Ctx& ctx, To* out, const From* in, int64_t n) {
  grid_stride(ctx, n, [&](int64_t i) { out[i] = narrow<To>(widen(in[i])); });
}

}  // namespace tessera::engine::kernels
