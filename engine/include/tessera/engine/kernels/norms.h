// LayerNorm and RMSNorm kernel bodies (see thread_context.h), the GPU twins of
// ops/layernorm.h with the same per-element arithmetic (elementwise_math.h)
// and the same statistics: mean and reciprocal standard deviation per row in
// the compute type.
//
// Parallel structure:
//   forward, input gradient: one block per row (rows strided by gridDim), the
//     block's threads stride over the row's C columns and combine their partial
//     sums with block_sum (block_reduce.h);
//   weight and bias gradients: a sum over rows per column, in two deterministic
//     stages: each (chunk of kNormRowsPerChunk rows, column) pair is summed by one
//     thread into `partials` (chunks, C) (neighbouring threads read neighbouring
//     columns), then one thread per column adds the chunks' sums in order and
//     accumulates (+=) into the gradient.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/host_device.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/block_reduce.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

// 256 threads: 8 warps, enough to hide latency on a row of 768..8192 columns
// (llm.c's layernorm_forward kernels use 256 or 512 per block as well).
inline constexpr unsigned kNormBlock = 256;
inline constexpr int64_t kNormRowsPerChunk = 64;

// Shared memory: one value per warp for block_sum, wide enough for a double compute type.
inline LaunchShape norm_rows_shape(int64_t N) { return {blocks_for(N, 1), kNormBlock, kNormBlock / kWarpSize * sizeof(double)}; }
TESSERA_HOST_DEVICE int64_t norm_chunks(int64_t N) { return (N + kNormRowsPerChunk - 1) / kNormRowsPerChunk; }
inline LaunchShape norm_partials_shape(int64_t N, int64_t C) { return {blocks_for(norm_chunks(N) * C, kNormBlock), kNormBlock, 0}; }
inline LaunchShape norm_columns_shape(int64_t C) { return {blocks_for(C, kNormBlock), kNormBlock, 0}; }

// out, inp (N, C); weight, bias (C) (bias may be null); mean, rstd (N).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void layernorm_forward_body(Ctx& ctx, T* out, compute_t<T>* mean, compute_t<T>* rstd, const T* inp, const T* weight, const T* bias,
                                                int64_t N, int64_t C, compute_t<T> eps) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* x = inp + n * C;
    W sum = 0;
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) sum += widen(x[i]);
    const W m = block_sum(ctx, sum, scratch) / static_cast<W>(C);
    W squares = 0;
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) squares += (widen(x[i]) - m) * (widen(x[i]) - m);
    const W s = math::inverse_std(block_sum(ctx, squares, scratch) / static_cast<W>(C), eps);
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) {
      out[n * C + i] = narrow<T>(math::layernorm_out(widen(x[i]), m, s, widen(weight[i]), bias ? widen(bias[i]) : W(0)));
    }
    if (ctx.thread_idx() == 0) {
      mean[n] = m;
      rstd[n] = s;
    }
  }
}

// dinp += dx (N, C), from dout, inp (N, C), weight (C) and the forward's statistics.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void layernorm_backward_input_body(Ctx& ctx, T* dinp, const T* dout, const T* inp, const T* weight, const compute_t<T>* mean,
                                                       const compute_t<T>* rstd, int64_t N, int64_t C) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    W g_sum = 0, gx_sum = 0;
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) {
      const W g = widen(dy[i]) * widen(weight[i]);
      g_sum += g;
      gx_sum += g * math::layernorm_xhat(widen(x[i]), mean[n], rstd[n]);
    }
    const W g_mean = block_sum(ctx, g_sum, scratch) / static_cast<W>(C);
    const W gx_mean = block_sum(ctx, gx_sum, scratch) / static_cast<W>(C);
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) {
      const W xhat = math::layernorm_xhat(widen(x[i]), mean[n], rstd[n]);
      dinp[n * C + i] = narrow<T>(widen(dinp[n * C + i]) + math::layernorm_dinp(widen(dy[i]), widen(weight[i]), xhat, rstd[n], g_mean, gx_mean));
    }
  }
}

template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void rmsnorm_forward_body(Ctx& ctx, T* out, compute_t<T>* rstd, const T* inp, const T* weight, int64_t N, int64_t C,
                                              compute_t<T> eps) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* x = inp + n * C;
    W squares = 0;
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) squares += widen(x[i]) * widen(x[i]);
    const W s = math::inverse_std(block_sum(ctx, squares, scratch) / static_cast<W>(C), eps);
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) out[n * C + i] = narrow<T>(math::rmsnorm_out(widen(x[i]), s, widen(weight[i])));
    if (ctx.thread_idx() == 0) rstd[n] = s;
  }
}

template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void rmsnorm_backward_input_body(Ctx& ctx, T* dinp, const T* dout, const T* inp, const T* weight, const compute_t<T>* rstd,
                                                     int64_t N, int64_t C) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    W gx_sum = 0;
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) gx_sum += widen(dy[i]) * widen(weight[i]) * widen(x[i]) * rstd[n];
    const W gx_mean = block_sum(ctx, gx_sum, scratch) / static_cast<W>(C);
    for (int64_t i = ctx.thread_idx(); i < C; i += ctx.block_dim()) {
      dinp[n * C + i] = narrow<T>(widen(dinp[n * C + i]) + math::rmsnorm_dinp(widen(dy[i]), widen(weight[i]), widen(x[i]), rstd[n], gx_mean));
    }
  }
}

// Stage 1 of the parameter gradients: partial_dw, partial_db (chunks, C) =
// Σ over the chunk's rows of dout · x̂ and of dout. `mean` null: RMSNorm
// (x̂ = x · rstd, no bias); `partial_db` may be null.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void norm_param_partials_body(Ctx& ctx, compute_t<T>* partial_dw, compute_t<T>* partial_db, const T* dout, const T* inp,
                                                  const compute_t<T>* mean, const compute_t<T>* rstd, int64_t N, int64_t C) {
  using W = compute_t<T>;
  grid_stride(ctx, norm_chunks(N) * C, [&](int64_t k) {
    const int64_t chunk = k / C, i = k % C;
    const int64_t end = (chunk + 1) * kNormRowsPerChunk < N ? (chunk + 1) * kNormRowsPerChunk : N;
    W dw = 0, db = 0;
    for (int64_t n = chunk * kNormRowsPerChunk; n < end; ++n) {
      const W x = widen(inp[n * C + i]);
      const W xhat = mean ? math::layernorm_xhat(x, mean[n], rstd[n]) : x * rstd[n];
      dw += widen(dout[n * C + i]) * xhat;
      db += widen(dout[n * C + i]);
    }
    partial_dw[k] = dw;
    if (partial_db) partial_db[k] = db;
  });
}

// Stage 2: grad (C) += Σ over chunks of partials (chunks, C), chunks in order.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void column_sums_accumulate_body(Ctx& ctx, T* grad, const compute_t<T>* partials, int64_t chunks, int64_t C) {
  using W = compute_t<T>;
  grid_stride(ctx, C, [&](int64_t i) {
    W sum = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) sum += partials[chunk * C + i];
    grad[i] = narrow<T>(widen(grad[i]) + sum);
  });
}

}  // namespace tessera::engine::kernels
