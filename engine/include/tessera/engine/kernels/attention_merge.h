// Ring attention's merge on the GPU (the CPU op: ops/attention_merge.h, same
// arithmetic and the same bits): one thread per query row and head of the
// rows the block reached walks the head's HS values, so the row's
// log-sum-exp is read and rewritten by one thread only.
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"
#include "tessera/engine/ops/attention_merge_rows.h"

namespace tessera::engine::kernels {

inline LaunchShape attention_merge_shape(const cpu::MergeRows& m) { return elementwise_shape(m.B * m.rows * m.NH); }

template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void attention_merge_body(Ctx& ctx, float* running, float* running_lse, const T* partial, const float* partial_lse,
                                              cpu::MergeRows m) {
  grid_stride(ctx, m.B * m.rows * m.NH, [&](int64_t i) {
    const int64_t h = i % m.NH, t = m.first + (i / m.NH) % m.rows, b = i / (m.NH * m.rows);
    float& lse = running_lse[(b * m.NH + h) * m.T + t];
    const math::LseMerge<float> w = math::lse_merge(lse, partial_lse[(b * m.NH + h) * m.T + t]);
    float* o = running + (b * m.T + t) * m.NH * m.HS + h * m.HS;
    const T* p = partial + (b * m.T + t) * m.NH * m.HS + h * m.HS;
    for (int64_t d = 0; d < m.HS; ++d) o[d] = o[d] * w.keep + widen(p[d]) * w.add;
    lse = w.lse;
  });
}

}  // namespace tessera::engine::kernels
