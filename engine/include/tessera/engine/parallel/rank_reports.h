// What ranks tell each other about themselves: whether each is ready (an
// agreement before a step every rank must take together), their memory peaks
// (rank 0 writes every rank's into metrics.json), the digests of the checkpoint
// shards they wrote (rank 0 lists them in the manifest), and the weights of
// their optimizer shards (rank 0 writes the whole model). Sizes and CRC-32s
// travel as doubles, exact below 2^53.
#pragma once

#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/file_io.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/memory_categories.h"

namespace tessera::engine {

struct RankPeaks {
  MemoryBreakdown peaks;  // per category and space: the category's own peak
  SpaceBytes total;       // the peak of each space's total
};

// Whether every rank's `ok` is true, on every rank (collective).
Result<bool> all_ranks_agree(comm::Communicator& group, bool ok);

RankPeaks rank_peaks(const MemoryLedger& ledger);
// Every rank's peaks, in rank order, on every rank (collective).
Result<std::vector<RankPeaks>> gather_rank_peaks(comm::Communicator& group, const MemoryLedger& ledger);
// Every rank's digest, in rank order, on every rank (collective). A rank whose
// write failed passes bytes = -1.
Result<std::vector<FileDigest>> gather_shard_digests(comm::Communicator& group, const FileDigest& digest);

// Rank 0 receives every rank's fp32 optimizer weights and places each piece
// at its parameter's flat offset in `out` (the model's parameter count); the
// other ranks pass null. Where each rank's pieces lie is the shared rule,
// planner::optimizer_layout, for `plugin` over the group. Collective.
Status gather_optimizer_weights(comm::Communicator& group, OptimizerShard& optimizer, const planner::Model& model,
                                const planner::PluginOptions& plugin, float* out);

}  // namespace tessera::engine
