// Which tokens of each sequence a context-parallel rank keeps
// (planner/context_parallel.h): the sequence is cut into 2·cp equal chunks
// and rank r keeps chunks r and 2·cp − 1 − r, in that order. Kept apart from
// context_parallel.h, with no other include, so that CUDA kernels (compiled
// as C++17) place RoPE's and the position embedding's positions by the same rule.
//
// Worked example, 16 tokens over cp 2 (chunks of 4): rank 0 keeps tokens
// 0-3 and 12-15, rank 1 tokens 4-11.
#pragma once

#include <cstdint>

namespace tessera::planner {

struct ContextSplit {
  int64_t cp = 1;    // ranks sharing each sequence (1: the whole sequence here)
  int64_t rank = 0;  // this rank among them

  // Tokens per chunk, for a rank holding `local_len` = seq_len / cp tokens.
  // constexpr: the GPU's position kernels call these too (nvcc's --expt-relaxed-constexpr, engine/src/cuda/CMakeLists.txt).
  constexpr int64_t chunk_len(int64_t local_len) const { return cp > 1 ? local_len / 2 : local_len; }
  // Where the local token at `local` (0 <= local < local_len) sits in the whole sequence.
  constexpr int64_t global_position(int64_t local, int64_t local_len) const {
    if (cp == 1) return local;
    const int64_t chunk = chunk_len(local_len);
    return local < chunk ? rank * chunk + local : (2 * cp - 1 - rank) * chunk + (local - chunk);
  }
};

}  // namespace tessera::planner
