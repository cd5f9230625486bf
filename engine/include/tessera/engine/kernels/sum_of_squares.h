// The gradients' sum of squares Σ (g / loss scale)² for global-norm clipping,
// and the fp16 overflow check (a non-finite sum means some gradient is inf or
// NaN: loss_scaler.h's non_finite), the GPU twin of
// Optimizer::sum_of_squares (optimizer.h), in double like it.
//
// Parallel structure, deterministic for a given n: stage 1 gives each chunk
// of kSquaresChunk elements (the CPU's block size) to one block (chunks
// strided by gridDim), whose threads stride over it and combine with
// block_sum into partials[chunk]; stage 2 is one block that adds the
// partials (threads strided, then block_sum) and writes the total and the flag.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/host_device.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/block_reduce.h"
#include "tessera/engine/kernels/thread_context.h"
#include "tessera/engine/loss_scaler.h"

namespace tessera::engine::kernels {

inline constexpr int64_t kSquaresChunk = int64_t{1} << 16;
inline constexpr unsigned kSquaresBlock = 256;

TESSERA_HOST_DEVICE int64_t squares_chunks(int64_t n) { return (n + kSquaresChunk - 1) / kSquaresChunk; }
inline LaunchShape squares_partials_shape(int64_t n) { return {blocks_for(squares_chunks(n), 1), kSquaresBlock, kSquaresBlock / kWarpSize * sizeof(double)}; }
inline LaunchShape squares_total_shape() { return {1, kSquaresBlock, kSquaresBlock / kWarpSize * sizeof(double)}; }

// partials (squares_chunks(n)) from grads (n).
template <typename Ctx, typename G>
TESSERA_KERNEL_BODY void squares_partials_body(Ctx& ctx, double* partials, const G* grads, int64_t n, double unscale) {
  double* scratch = ctx.template shared<double>();
  for (int64_t chunk = ctx.block_idx(); chunk < squares_chunks(n); chunk += ctx.grid_dim()) {
    const int64_t end = (chunk + 1) * kSquaresChunk < n ? (chunk + 1) * kSquaresChunk : n;
    double sum = 0;
    for (int64_t i = chunk * kSquaresChunk + ctx.thread_idx(); i < end; i += ctx.block_dim()) sum += math::unscaled_square(widen(grads[i]), unscale);
    const double total = block_sum(ctx, sum, scratch);
    if (ctx.thread_idx() == 0) partials[chunk] = total;
  }
}

// *sum_of_squares = Σ partials; *overflow = 1 when it is inf or NaN, else 0.
template <typename Ctx>
TESSERA_KERNEL_BODY void squares_total_body(Ctx& ctx, double* sum_of_squares, int32_t* overflow, const double* partials, int64_t chunks) {
  double sum = 0;
  for (int64_t k = ctx.thread_idx(); k < chunks; k += ctx.block_dim()) sum += partials[k];
  const double total = block_sum(ctx, sum, ctx.template shared<double>());
  if (ctx.thread_idx() == 0) {
    *sum_of_squares = total;
    *overflow = non_finite(total) ? 1 : 0;
  }
}

}  // namespace tessera::engine::kernels
