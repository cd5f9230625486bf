// What ranks tell each other about themselves: their memory peaks (rank 0
// writes every rank's into metrics.json) and the digests of the checkpoint
// shards they wrote (rank 0 lists them in the manifest). Sizes and CRC-32s
// travel as doubles, exact below 2^53.
#pragma once

#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/file_io.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/planner/memory_categories.h"

namespace tessera::engine {

struct RankPeaks {
  MemoryBreakdown peaks;  // per category and space: the category's own peak
  SpaceBytes total;       // the peak of each space's total
};

RankPeaks rank_peaks(const MemoryLedger& ledger);
// Every rank's peaks, in rank order, on every rank (collective).
Result<std::vector<RankPeaks>> gather_rank_peaks(comm::Communicator& group, const MemoryLedger& ledger);
// Every rank's digest, in rank order, on every rank (collective). A rank whose
// write failed passes bytes = -1.
Result<std::vector<FileDigest>> gather_shard_digests(comm::Communicator& group, const FileDigest& digest);

}  // namespace tessera::engine
