// Linear layer: out (N, OC) = inp (N, C) · W + bias.
// Weights come in the layout Hugging Face stores: torch.nn.Linear keeps W as
// (OC, C) (out = inp · Wᵀ); GPT-2's Conv1D keeps it as (C, OC) (out = inp · W).
// Backward: the input gradient overwrites `dinp`, or adds to it with
// `accumulate_dinp` (projections that share an input); parameter gradients
// accumulate into `dweight` and `dbias` (+=), so micro-batches add up.
// T is the storage type of inputs and weights; the output (and its gradient)
// may be wider: the head writes fp32 logits from 16-bit activations.
#pragma once

#include <cstdint>

#include "tessera/engine/ops/gemm.h"

namespace tessera::engine::cpu {

enum class WeightLayout { out_in, in_out };

template <typename T, typename TOut>
void linear_forward(TOut* out, const T* inp, const T* weight, const T* bias, int64_t N, int64_t C, int64_t OC, WeightLayout layout,
                    Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  const bool trans_w = layout == WeightLayout::out_in;
  if (bias != nullptr) {
    // The bias goes in first and the GEMM adds to it (beta = 1): one rounding of the sum in 16 bits.
#pragma omp parallel for
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t o = 0; o < OC; ++o) out[n * OC + o] = narrow<TOut>(widen(bias[o]));
    }
  }
  gemm(false, trans_w, N, OC, C, W(1), inp, C, weight, trans_w ? C : OC, bias != nullptr ? W(1) : W(0), out, OC, workspace);
}

// The input gradient alone: dinp (N, C) = dout · W (or += with accumulate_dinp).
// Each row needs only its own row of dout, so it runs on any range of rows.
template <typename T, typename TOut>
void linear_backward_input(T* dinp, const TOut* dout, const T* weight, int64_t N, int64_t C, int64_t OC, WeightLayout layout,
                           Workspace<compute_t<T>>& workspace, bool accumulate_dinp = false) {
  using W = compute_t<T>;
  const W beta = accumulate_dinp ? W(1) : W(0);
  if (layout == WeightLayout::out_in) {
    gemm(false, false, N, C, OC, W(1), dout, OC, weight, C, beta, dinp, C, workspace);   // dinp = dout · W
  } else {
    gemm(false, true, N, C, OC, W(1), dout, OC, weight, OC, beta, dinp, C, workspace);   // dinp = dout · Wᵀ
  }
}

// The parameter gradients alone: dweight += doutᵀ · inp (its layout), dbias += Σ_n dout (when not null).
template <typename T, typename TOut>
void linear_backward_weight(T* dweight, T* dbias, const TOut* dout, const T* inp, int64_t N, int64_t C, int64_t OC, WeightLayout layout,
                            Workspace<compute_t<T>>& workspace) {
  using W = compute_t<T>;
  if (layout == WeightLayout::out_in) {
    gemm(true, false, OC, C, N, W(1), dout, OC, inp, C, W(1), dweight, C, workspace);    // dW += doutᵀ · inp
  } else {
    gemm(true, false, C, OC, N, W(1), inp, C, dout, OC, W(1), dweight, OC, workspace);   // dW += inpᵀ · dout
  }
  if (dbias == nullptr) return;
#pragma omp parallel for
  for (int64_t o = 0; o < OC; ++o) {
    W sum = 0;
    for (int64_t n = 0; n < N; ++n) sum += widen(dout[n * OC + o]);
    dbias[o] = narrow<T>(widen(dbias[o]) + sum);
  }
}

template <typename T, typename TOut>
void linear_backward(T* dinp, T* dweight, T* dbias, const TOut* dout, const T* inp, const T* weight, int64_t N, int64_t C, int64_t OC,
                     WeightLayout layout, Workspace<compute_t<T>>& workspace, bool accumulate_dinp = false) {
  linear_backward_input(dinp, dout, weight, N, C, OC, layout, workspace, accumulate_dinp);
  linear_backward_weight(dweight, dbias, dout, inp, N, C, OC, layout, workspace);
}

}  // namespace tessera::engine::cpu
