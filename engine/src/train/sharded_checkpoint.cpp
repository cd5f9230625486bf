#include "tessera/engine/sharded_checkpoint.h"

#include "tessera/engine/parallel/rank_reports.h"

namespace tessera::engine {

Result<std::vector<CheckpointFile>> write_sharded_checkpoint(comm::Communicator& group, const std::string& directory, const planner::Model& model,
                                                             OptimizerShard& optimizer, const planner::PluginOptions& plugin, planner::OptimizerKind kind,
                                                             const TrainingPosition& position) {
  const int rank = group.rank(), ranks = group.size();
  std::vector<float> weights(rank == 0 ? static_cast<size_t>(model.parameter_count) : 0);  // rank 0's copy of the whole model
  if (Status s = gather_shard_values(group, optimizer, optimizer.weights(), model, plugin, weights.empty() ? nullptr : weights.data()); !s) return s.error();
  auto files = write_sharded_checkpoint_files(directory, model, optimizer, kind, position, rank, ranks, weights.data(),
                                              shard_layout_metadata(model, plugin, ranks));
  // Every rank takes part, a failed write passing bytes = -1.
  auto listed = gather_shard_digests(group, files.ok() ? files->back().digest : FileDigest{-1, ""});
  if (!listed) return listed.error();
  if (!files) return files.error();
  if (rank != 0) return files;
  for (int r = 1; r < ranks; ++r) {
    const FileDigest& digest = listed.value()[static_cast<size_t>(r)];
    if (digest.bytes < 0) return make_error(ErrorCode::io_error, "rank " + std::to_string(r) + " could not write its optimizer shard (its message says why)");
    files.value().push_back({optimizer_shard_file_name(r, ranks), digest});
  }
  return files;
}

}  // namespace tessera::engine
