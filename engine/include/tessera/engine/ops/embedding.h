// Token embedding plus an optional learned position table (GPT-2):
// out (B, T, C) = wte[tokens] + wpe[t], as two ops so that a vocabulary split
// over tensor-parallel ranks can sum the ranks' lookups before the positions
// are added once. Backward accumulates into dwte and dwpe.
#pragma once

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/engine/ops/vocab_slice.h"
#include "tessera/planner/context_parallel.h"

namespace tessera::engine::cpu {

// out = wte[token - first_class] for the slice's tokens, 0 for the others.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, int64_t B, int64_t Tn, int64_t C, VocabSlice slice = {}) {
#pragma omp parallel for
  for (int64_t r = 0; r < B * Tn; ++r) {
    const bool owned = slice.owns(tokens[r]);
    const T* e = wte + (static_cast<int64_t>(tokens[r]) - slice.first_class) * C;
    for (int64_t i = 0; i < C; ++i) out[r * C + i] = owned ? e[i] : T{};
  }
}

// out += wpe[t] at position t of each sequence, for `rows` rows of the batch's
// (B · Tn) starting at `first_row` (a sequence-parallel rank's share); under
// context parallelism t is the position in the whole sequence (`split`).
template <typename T>
void position_embedding_forward(T* out, const T* wpe, int64_t rows, int64_t Tn, int64_t C, int64_t first_row = 0, const planner::ContextSplit& split = {}) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const T* p = wpe + split.global_position((first_row + r) % Tn, Tn) * C;
    for (int64_t i = 0; i < C; ++i) out[r * C + i] = narrow<T>(widen(out[r * C + i]) + widen(p[i]));
  }
}

// Serial: two positions may hold the same token, and the sum must not depend on threads.
template <typename T>
void embedding_backward(T* dwte, const T* dout, const int32_t* tokens, int64_t B, int64_t Tn, int64_t C, VocabSlice slice = {}) {
  for (int64_t r = 0; r < B * Tn; ++r) {
    if (!slice.owns(tokens[r])) continue;
    T* e = dwte + (static_cast<int64_t>(tokens[r]) - slice.first_class) * C;
    for (int64_t i = 0; i < C; ++i) e[i] = narrow<T>(widen(e[i]) + widen(dout[r * C + i]));
  }
}

template <typename T>
void position_embedding_backward(T* dwpe, const T* dout, int64_t B, int64_t Tn, int64_t C, const planner::ContextSplit& split = {}) {
  for (int64_t r = 0; r < B * Tn; ++r) {
    T* p = dwpe + split.global_position(r % Tn, Tn) * C;
    for (int64_t i = 0; i < C; ++i) p[i] = narrow<T>(widen(p[i]) + widen(dout[r * C + i]));
  }
}

}  // namespace tessera::engine::cpu
