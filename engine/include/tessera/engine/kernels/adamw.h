// AdamW over flat buffers (the GPU twin of Optimizer::apply's adamw case,
// optimizer.h, with the same per-element update, math::adamw_update, and the
// same per-step scalars, adamw_step.h). One element per thread of a
// grid-stride loop; elements are independent, so the result has the same bits
// as the CPU's. Launched once per range that shares a weight decay (a
// parameter, or a parameter's part of a ZeRO shard).
#pragma once

#include <cstdint>

#include "tessera/engine/adamw_step.h"
#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

// weights, m, v (n) fp32: the master weights (or fp32 parameters) and the
// moments, updated in place; grads (n) in the model's type G (or fp32 when
// offloaded); params (n): the 16-bit copy the weights are rounded into, or
// null when the weights are the parameters.
template <typename Ctx, typename T, typename G>
TESSERA_KERNEL_BODY void adamw_body(Ctx& ctx, T* params, float* weights, float* m, float* v, const G* grads, int64_t n, float weight_decay,
                                    AdamWScalars s) {
  grid_stride(ctx, n, [&](int64_t i) {
    const float grad = widen(grads[i]) * s.gradient_factor;
    math::adamw_update(weights[i], m[i], v[i], grad, s.lr, s.beta1, s.beta2, s.eps, weight_decay, s.bias1, s.bias2);
    if (params) params[i] = narrow<T>(weights[i]);
  });
}

}  // namespace tessera::engine::kernels
