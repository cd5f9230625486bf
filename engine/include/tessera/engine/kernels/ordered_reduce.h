// The communicators' rank-order reduction (comm/ordered_reduce.h) on a GPU,
// for the NCCL backend: out[k] = slice_0[k] op slice_1[k] op ... op
// slice_{n-1}[k], left to right, one element per thread of a grid-stride
// loop. Each thread combines its element's n operands in rank order, in the
// element's compute type (fp32 for 16-bit types, rounded once), with the
// combine step the CPU reduction uses too, so both give the same bits.
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/engine/host_device.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

// One step of the rank-order reduction. max: NaN wins (a running NaN stays;
// a NaN operand fails `running >= x` and is taken), and of equal values (-0
// and +0) the lower rank's.
template <typename Acc>
TESSERA_HOST_DEVICE Acc combine_in_rank_order(Acc running, Acc x, bool take_max) {
  if (!take_max) return running + x;
  return (running != running || running >= x) ? running : x;
}

// `slices` holds n slices of `count` elements one after another; `out` does not overlap them.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void ordered_reduce_body(Ctx& ctx, T* out, const T* slices, int n, int64_t count, bool take_max) {
  grid_stride(ctx, count, [&](int64_t k) {
    compute_t<T> value = widen(slices[k]);
    for (int i = 1; i < n; ++i) value = combine_in_rank_order(value, widen(slices[static_cast<int64_t>(i) * count + k]), take_max);
    out[k] = narrow<T>(value);
  });
}

}  // namespace tessera::engine::kernels
