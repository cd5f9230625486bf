// How the rank-ordered reductions (ordered_reduce.h) cut a buffer into one
// chunk per rank: rank r reduces chunk r. Shared by the MPI and NCCL
// backends, so that both reduce the same elements on the same rank and give
// the same bits; and the point-to-point transfers the NCCL backend moves the
// chunks with (MPI's all-to-all does the same in one call).
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

// reduce_scatter_v's chunks: the given counts, back to back.
template <typename Int>
ChunkLayout<Int> given_chunks(const std::vector<size_t>& counts) {
  ChunkLayout<Int> chunks{std::vector<Int>(counts.size()), std::vector<Int>(counts.size())};
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    chunks.counts[r] = static_cast<Int>(counts[r]);
    chunks.offsets[r] = static_cast<Int>(offset);
    offset += counts[r];
  }
  return chunks;
}

// One rank's traffic with one other rank in a chunk exchange, in elements:
// what it sends there and what it receives from there. A count of 0 is no
// call at all, on both sides.
struct PeerTransfer {
  int peer = 0;
  size_t send_offset = 0, send_count = 0;
  size_t recv_offset = 0, recv_count = 0;
};

// The first step of a rank-order reduction, for `rank`: chunk p of the input
// to each other rank p, and from each its copy of chunk `rank`, into slot p
// of a scratch buffer of size() · mine elements (slot `rank`, its own copy, is
// the caller's to fill).
inline std::vector<PeerTransfer> chunk_exchange(const ChunkLayout<size_t>& chunks, int rank) {
  const size_t n = chunks.counts.size(), mine = chunks.counts[static_cast<size_t>(rank)];
  std::vector<PeerTransfer> transfers;
  for (size_t p = 0; p < n; ++p) {
    if (p != static_cast<size_t>(rank)) transfers.push_back({static_cast<int>(p), chunks.offsets[p], chunks.counts[p], p * mine, mine});
  }
  return transfers;
}

// all_reduce's last step, for `rank`: its reduced chunk (in place in the
// output) to each other rank, and theirs into place.
inline std::vector<PeerTransfer> chunk_gather(const ChunkLayout<size_t>& chunks, int rank) {
  const size_t n = chunks.counts.size(), me = static_cast<size_t>(rank);
  std::vector<PeerTransfer> transfers;
  for (size_t p = 0; p < n; ++p) {
    if (p != me) transfers.push_back({static_cast<int>(p), chunks.offsets[me], chunks.counts[me], chunks.offsets[p], chunks.counts[p]});
  }
  return transfers;
}

}  // namespace tessera::engine::comm
