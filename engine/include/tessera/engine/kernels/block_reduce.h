// Reductions of one value per thread over a block, returned to every thread:
// within each warp by a butterfly of shuffles (every lane ends with the warp's
// result; IEEE addition and max are commutative, so all lanes hold the same
// bits), then lane 0 of each warp writes its result to shared memory and every
// thread combines the warps' results in warp order. The order of operations
// depends only on blockDim, never on timing: the result is deterministic.
// Needs blockDim.x a multiple of 32 (full-mask shuffles) and `scratch` of
// blockDim.x / 32 values in shared memory; the scratch is free again on return.
#pragma once

#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

struct SumOp {
  template <typename W>
  TESSERA_KERNEL_BODY W operator()(W a, W b) const { return a + b; }
};

// A NaN in `b` is dropped, as std::max_element drops it; a row holding a NaN
// still ends NaN, through its sum of e^(x − max).
struct MaxOp {
  template <typename W>
  TESSERA_KERNEL_BODY W operator()(W a, W b) const { return b > a ? b : a; }
};

template <typename Ctx, typename W, typename Op>
TESSERA_KERNEL_BODY W block_reduce(Ctx& ctx, W value, W* scratch, Op op) {
  for (unsigned lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) value = op(value, ctx.shfl_xor(value, lane_mask));
  if (ctx.thread_idx() % kWarpSize == 0) scratch[ctx.thread_idx() / kWarpSize] = value;
  ctx.sync();
  W result = scratch[0];
  for (unsigned warp = 1; warp < ctx.block_dim() / kWarpSize; ++warp) result = op(result, scratch[warp]);
  ctx.sync();  // every thread has read the scratch: the next reduction may write it
  return result;
}

template <typename Ctx, typename W>
TESSERA_KERNEL_BODY W block_sum(Ctx& ctx, W value, W* scratch) {
  return block_reduce(ctx, value, scratch, SumOp{});
}

template <typename Ctx, typename W>
TESSERA_KERNEL_BODY W block_max(Ctx& ctx, W value, W* scratch) {
  return block_reduce(ctx, value, scratch, MaxOp{});
}

}  // namespace tessera::engine::kernels
