// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last
// dimension C of N rows. Forward keeps what backward needs: the mean and the
// reciprocal standard deviation per row, in the compute type (fp32 statistics
// in mixed precision). Backward accumulates into `dinp` (a norm's input is
// always the residual stream, whose gradient collects every branch) and into
// `dweight`, `dbias`.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"

namespace tessera::engine::cpu {

template <typename T>
void layernorm_forward(T* out, compute_t<T>* mean, compute_t<T>* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C,
                       compute_t<T> eps) {
  using W = compute_t<T>;
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    W m = 0;
    for (int64_t i = 0; i < C; ++i) m += widen(x[i]);
    m /= static_cast<W>(C);
    W v = 0;
    for (int64_t i = 0; i < C; ++i) v += (widen(x[i]) - m) * (widen(x[i]) - m);
    v /= static_cast<W>(C);
    const W s = math::inverse_std(v, eps);
    for (int64_t i = 0; i < C; ++i) out[n * C + i] = narrow<T>(math::layernorm_out(widen(x[i]), m, s, widen(weight[i]), bias ? widen(bias[i]) : W(0)));
    mean[n] = m;
    rstd[n] = s;
  }
}

// dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)), g = dout · weight (Ba et al. 2016, backprop of the normalisation).
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const compute_t<T>* mean,
                        const compute_t<T>* rstd, int64_t N, int64_t C) {
  using W = compute_t<T>;
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    W g_mean = 0, gx_mean = 0;
    for (int64_t i = 0; i < C; ++i) {
      const W xhat = math::layernorm_xhat(widen(x[i]), mean[n], rstd[n]);
      const W g = widen(dy[i]) * widen(weight[i]);
      g_mean += g;
      gx_mean += g * xhat;
    }
    g_mean /= static_cast<W>(C);
    gx_mean /= static_cast<W>(C);
    for (int64_t i = 0; i < C; ++i) {
      const W xhat = math::layernorm_xhat(widen(x[i]), mean[n], rstd[n]);
      dinp[n * C + i] = narrow<T>(widen(dinp[n * C + i]) + math::layernorm_dinp(widen(dy[i]), widen(weight[i]), xhat, rstd[n], g_mean, gx_mean));
    }
  }
  // Parameter gradients: per column, a sum over rows in the compute type, added once.
#pragma omp parallel for
  for (int64_t i = 0; i < C; ++i) {
    W dw = 0, db = 0;
    for (int64_t n = 0; n < N; ++n) {
      const W xhat = math::layernorm_xhat(widen(inp[n * C + i]), mean[n], rstd[n]);
      dw += widen(dout[n * C + i]) * xhat;
      db += widen(dout[n * C + i]);
    }
    dweight[i] = narrow<T>(widen(dweight[i]) + dw);
    if (dbias) dbias[i] = narrow<T>(widen(dbias[i]) + db);
  }
}

template <typename T>
void rmsnorm_forward(T* out, compute_t<T>* rstd, const T* inp, const T* weight, int64_t N, int64_t C, compute_t<T> eps) {
  using W = compute_t<T>;
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    W ms = 0;
    for (int64_t i = 0; i < C; ++i) ms += widen(x[i]) * widen(x[i]);
    const W s = math::inverse_std(ms / static_cast<W>(C), eps);
    for (int64_t i = 0; i < C; ++i) out[n * C + i] = narrow<T>(math::rmsnorm_out(widen(x[i]), s, widen(weight[i])));
    rstd[n] = s;
  }
}

// dx = rstd · (g − x̂ · mean(g · x̂)), g = dout · weight, x̂ = x · rstd.
template <typename T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const compute_t<T>* rstd, int64_t N, int64_t C) {
  using W = compute_t<T>;
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    W gx_mean = 0;
    for (int64_t i = 0; i < C; ++i) gx_mean += widen(dy[i]) * widen(weight[i]) * widen(x[i]) * rstd[n];
    gx_mean /= static_cast<W>(C);
    for (int64_t i = 0; i < C; ++i) {
      dinp[n * C + i] = narrow<T>(widen(dinp[n * C + i]) + math::rmsnorm_dinp(widen(dy[i]), widen(weight[i]), widen(x[i]), rstd[n], gx_mean));
    }
  }
#pragma omp parallel for
  for (int64_t i = 0; i < C; ++i) {
    W dw = 0;
    for (int64_t n = 0; n < N; ++n) dw += widen(dout[n * C + i]) * widen(inp[n * C + i]) * rstd[n];
    dweight[i] = narrow<T>(widen(dweight[i]) + dw);
  }
}

}  // namespace tessera::engine::cpu
