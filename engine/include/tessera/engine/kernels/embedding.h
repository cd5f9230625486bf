// Token and position embeddings (the GPU twins of ops/embedding.h).
// Forward: one output element per thread of a grid-stride loop. Backward
// must add every row that holds a token into that token's gradient, and two
// rows may hold the same token: rather than atomics (whose order, and so
// whose float sum, changes from run to run), each thread owns one column of
// the gradient and walks the rows in order: deterministic, and the same
// additions in the same order as the CPU op, so the same bits.
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"
#include "tessera/engine/ops/vocab_slice.h"
#include "tessera/planner/context_split.h"

namespace tessera::engine::kernels {

// out (rows, C) = wte[token − first_class], or 0 for a token of another rank's slice.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void embedding_forward_body(Ctx& ctx, T* out, const int32_t* tokens, const T* wte, int64_t rows, int64_t C, cpu::VocabSlice slice) {
  grid_stride(ctx, rows * C, [&](int64_t k) {
    const int64_t r = k / C, i = k % C;
    out[k] = slice.owns(tokens[r]) ? wte[(static_cast<int64_t>(tokens[r]) - slice.first_class) * C + i] : T{};
  });
}

// out (rows, C) += wpe[t] for the token t = (first_row + r) mod Tn (its position in the whole sequence under `split`).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void position_embedding_forward_body(Ctx& ctx, T* out, const T* wpe, int64_t rows, int64_t Tn, int64_t C, int64_t first_row,
                                                         planner::ContextSplit split = {}) {
  grid_stride(ctx, rows * C, [&](int64_t k) {
    const int64_t r = k / C, i = k % C;
    out[k] = narrow<T>(widen(out[k]) + widen(wpe[split.global_position((first_row + r) % Tn, Tn) * C + i]));
  });
}

// dwte (slice, C) += dout rows by token; one thread per column.
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void embedding_backward_body(Ctx& ctx, T* dwte, const T* dout, const int32_t* tokens, int64_t rows, int64_t C, cpu::VocabSlice slice) {
  grid_stride(ctx, C, [&](int64_t i) {
    for (int64_t r = 0; r < rows; ++r) {
      if (!slice.owns(tokens[r])) continue;
      T& e = dwte[(static_cast<int64_t>(tokens[r]) - slice.first_class) * C + i];
      e = narrow<T>(widen(e) + widen(dout[r * C + i]));
    }
  });
}

// dwpe (Tn, C) += Σ over the batch's B sequences; one thread per (position, column), sequences in order.
// Under `split` local token t adds into its position in the whole sequence (one local token per position).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void position_embedding_backward_body(Ctx& ctx, T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C,
                                                          planner::ContextSplit split = {}) {
  grid_stride(ctx, Tn * C, [&](int64_t k) {
    T& p = dwpe[split.global_position(k / C, Tn) * C + k % C];
    for (int64_t b = 0; b < B; ++b) p = narrow<T>(widen(p) + widen(dout[b * Tn * C + k]));
  });
}

}  // namespace tessera::engine::kernels
