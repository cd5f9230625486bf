// Linear layer: out (N, OC) = inp (N, C) · W + bias.
// Weights come in the layout Hugging Face stores: torch.nn.Linear keeps W as
// (OC, C) (out = inp · Wᵀ); GPT-2's Conv1D keeps it as (C, OC) (out = inp · W).
// Backward: the input gradient overwrites `dinp`, or adds to it with
// `accumulate_dinp` (projections that share an input); parameter gradients
// accumulate into `dweight` and `dbias` (+=), so micro-batches add up.
#pragma once

#include <cstdint>

#include "tessera/engine/ops/gemm.h"

namespace tessera::engine::cpu {

enum class WeightLayout { out_in, in_out };

template <typename T>
void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, int64_t OC, WeightLayout layout) {
  const bool trans_w = layout == WeightLayout::out_in;
  gemm(false, trans_w, N, OC, C, T(1), inp, C, weight, trans_w ? C : OC, T(0), out, OC);
  if (bias == nullptr) return;
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < OC; ++o) out[n * OC + o] += bias[o];
  }
}

template <typename T>
void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight, int64_t N, int64_t C, int64_t OC,
                     WeightLayout layout, bool accumulate_dinp = false) {
  const T beta = accumulate_dinp ? T(1) : T(0);
  if (layout == WeightLayout::out_in) {
    gemm(false, false, N, C, OC, T(1), dout, OC, weight, C, beta, dinp, C);         // dinp = dout · W
    gemm(true, false, OC, C, N, T(1), dout, OC, inp, C, T(1), dweight, C);          // dW += doutᵀ · inp
  } else {
    gemm(false, true, N, C, OC, T(1), dout, OC, weight, OC, beta, dinp, C);         // dinp = dout · Wᵀ
    gemm(true, false, C, OC, N, T(1), inp, C, dout, OC, T(1), dweight, OC);         // dW += inpᵀ · dout
  }
  if (dbias == nullptr) return;
#pragma omp parallel for
  for (int64_t o = 0; o < OC; ++o) {
    T sum = 0;
    for (int64_t n = 0; n < N; ++n) sum += dout[n * OC + o];
    dbias[o] += sum;
  }
}

}  // namespace tessera::engine::cpu
