// Ring attention's merge (model/ring_attention.h): one key block's partial
// attention output, in the storage type as a flash kernel writes it, merged
// into the running output, held in the compute type so that it is rounded
// once, after the last block, rather than at every step. Rows [first, first +
// rows) of each sample; the log-sum-exps are (B, NH, T), the outputs
// (B, T, NH·HS). The GPU runs the same arithmetic (kernels/attention_merge.h).
#pragma once

#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/ops/attention_merge_rows.h"

namespace tessera::engine::cpu {

template <typename T, typename W>
void attention_merge(W* running, W* running_lse, const T* partial, const W* partial_lse, const MergeRows& m) {
  const int64_t width = m.NH * m.HS;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < m.B; ++b) {
    for (int64_t h = 0; h < m.NH; ++h) {
      for (int64_t t = m.first; t < m.first + m.rows; ++t) {
        W& lse = running_lse[(b * m.NH + h) * m.T + t];
        const math::LseMerge<W> w = math::lse_merge(lse, partial_lse[(b * m.NH + h) * m.T + t]);
        W* o = running + (b * m.T + t) * width + h * m.HS;
        const T* p = partial + (b * m.T + t) * width + h * m.HS;
        for (int64_t d = 0; d < m.HS; ++d) o[d] = o[d] * w.keep + widen(p[d]) * w.add;
        lse = w.lse;
      }
    }
  }
}

}  // namespace tessera::engine::cpu
