// LayerNorm (Ba et al. 2016) and RMSNorm (Zhang & Sennrich 2019) over the last
// dimension C of N rows. Forward keeps what backward needs: the mean and the
// reciprocal standard deviation per row (fp32 statistics in the engine).
// Backward accumulates into `dinp` (a norm's input is always the residual
// stream, whose gradient collects every branch) and into `dweight`, `dbias`.
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera::engine::cpu {

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, T eps) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T m = 0;
    for (int64_t i = 0; i < C; ++i) m += x[i];
    m /= static_cast<T>(C);
    T v = 0;
    for (int64_t i = 0; i < C; ++i) v += (x[i] - m) * (x[i] - m);
    v /= static_cast<T>(C);
    const T s = T(1) / std::sqrt(v + eps);
    for (int64_t i = 0; i < C; ++i) out[n * C + i] = (x[i] - m) * s * weight[i] + (bias ? bias[i] : T(0));
    mean[n] = m;
    rstd[n] = s;
  }
}

// dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)), g = dout · weight (Ba et al. 2016, backprop of the normalisation).
template <typename T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, const T* mean, const T* rstd,
                        int64_t N, int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    T g_mean = 0, gx_mean = 0;
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = (x[i] - mean[n]) * rstd[n];
      const T g = dy[i] * weight[i];
      g_mean += g;
      gx_mean += g * xhat;
    }
    g_mean /= static_cast<T>(C);
    gx_mean /= static_cast<T>(C);
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = (x[i] - mean[n]) * rstd[n];
      dinp[n * C + i] += rstd[n] * (dy[i] * weight[i] - g_mean - xhat * gx_mean);
    }
  }
  for (int64_t n = 0; n < N; ++n) {  // parameter gradients: a reduction over rows, kept serial for determinism
    for (int64_t i = 0; i < C; ++i) {
      const T xhat = (inp[n * C + i] - mean[n]) * rstd[n];
      dweight[i] += dout[n * C + i] * xhat;
      if (dbias) dbias[i] += dout[n * C + i];
    }
  }
}

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* weight, int64_t N, int64_t C, T eps) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T ms = 0;
    for (int64_t i = 0; i < C; ++i) ms += x[i] * x[i];
    const T s = T(1) / std::sqrt(ms / static_cast<T>(C) + eps);
    for (int64_t i = 0; i < C; ++i) out[n * C + i] = x[i] * s * weight[i];
    rstd[n] = s;
  }
}

// dx = rstd · (g − x̂ · mean(g · x̂)), g = dout · weight, x̂ = x · rstd.
template <typename T>
void rmsnorm_backward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const T* rstd, int64_t N, int64_t C) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* dy = dout + n * C;
    T gx_mean = 0;
    for (int64_t i = 0; i < C; ++i) gx_mean += dy[i] * weight[i] * x[i] * rstd[n];
    gx_mean /= static_cast<T>(C);
    for (int64_t i = 0; i < C; ++i) dinp[n * C + i] += rstd[n] * (dy[i] * weight[i] - x[i] * rstd[n] * gx_mean);
  }
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = 0; i < C; ++i) dweight[i] += dout[n * C + i] * inp[n * C + i] * rstd[n];
  }
}

}  // namespace tessera::engine::cpu
