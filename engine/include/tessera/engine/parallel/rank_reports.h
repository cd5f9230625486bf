// What ranks tell each other about themselves: whether each is ready (an
// agreement before a step every rank must take together), their memory peaks
// (rank 0 writes every rank's into metrics.json), the digests of the checkpoint
// shards they wrote (rank 0 lists them in the manifest), and the weights of
// their optimizer shards and tensor-parallel parts (rank 0 writes the whole model). Sizes and CRC-32s
// travel as doubles, exact below 2^53.
#pragma once

#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/file_io.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/timeline.h"
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

// Rank 0 receives every rank's timeline events, in rank order; the other
// ranks get an empty list. Collective.
Result<std::vector<std::vector<TimelineEvent>>> gather_timelines(comm::Communicator& group, const Timeline& timeline);

// Rank 0 receives every rank's values of its optimizer shard (`mine`: the
// fp32 weights, or one of the states) and places each piece at its
// parameter's flat offset in `out` (the model's parameter count); the other
// ranks pass null. Where each rank's pieces lie is the shared rule,
// planner::optimizer_layout, for `plugin` over the group. Collective.
Status gather_shard_values(comm::Communicator& group, const OptimizerShard& optimizer, const float* mine, const planner::Model& model,
                           const planner::PluginOptions& plugin, float* out);

// Rank 0 of a tensor-parallel group of `tp` ranks receives every rank's part
// (`mine`: flat values of the model one tp rank holds, planner::tp_rank_model)
// and writes the whole model's flat values into `out` (its parameter count;
// the replicated tensors from its own part); the other ranks pass null.
// Collective.
Status gather_tensor_parallel_parts(comm::Communicator& group, const float* mine, const planner::Model& whole, float* out);

}  // namespace tessera::engine
