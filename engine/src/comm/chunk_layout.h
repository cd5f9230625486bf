// How the rank-ordered reductions (ordered_reduce.h) cut a buffer into one
// chunk per rank: rank r reduces chunk r. Shared by the MPI and NCCL
// backends, so that both reduce the same elements on the same rank and give
// the same bits. Private to the backends.
#pragma once

#include <cstddef>
#include <vector>

namespace tessera::engine::comm {

// Where each rank's chunk of an n-way split lies, in elements (Int: MPI's int, or size_t).
template <typename Int>
struct ChunkLayout {
  std::vector<Int> counts, offsets;
};

// all_reduce's chunks: chunk r is [count · r / n, count · (r+1) / n), so sizes
// differ by at most one.
template <typename Int>
ChunkLayout<Int> balanced_chunks(size_t count, int n) {
  ChunkLayout<Int> chunks{std::vector<Int>(static_cast<size_t>(n)), std::vector<Int>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) {
    const size_t begin = count * static_cast<size_t>(r) / static_cast<size_t>(n);
    const size_t end = count * static_cast<size_t>(r + 1) / static_cast<size_t>(n);
    chunks.offsets[static_cast<size_t>(r)] = static_cast<Int>(begin);
    chunks.counts[static_cast<size_t>(r)] = static_cast<Int>(end - begin);
  }
  return chunks;
}

// reduce_scatter's chunks (and the gathered copies of one chunk): n of `chunk` elements each.
template <typename Int>
ChunkLayout<Int> equal_chunks(size_t chunk, int n) {
  ChunkLayout<Int> chunks{std::vector<Int>(static_cast<size_t>(n), static_cast<Int>(chunk)), std::vector<Int>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) chunks.offsets[static_cast<size_t>(r)] = static_cast<Int>(chunk * static_cast<size_t>(r));
  return chunks;
}

}  // namespace tessera::engine::comm
