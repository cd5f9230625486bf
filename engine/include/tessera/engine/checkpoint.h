// The files of one checkpoint, written into the directory RunDirectory stages
// (run_directory.h has the commit protocol):
//  - model.safetensors: the parameters under their Hugging Face names (so
//    transformers can load a GPT-2 checkpoint), at full precision: mixed
//    precision runs save their fp32 master weights;
//  - optimizer.safetensors: the optimizer states ("<name>.exp_avg",
//    "<name>.exp_avg_sq" or "<name>.momentum_buffer") and, as metadata, the
//    step, the data position and the fp16 loss scaler's state.
// Both carry the step in their metadata; loading checks it against the manifest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/engine/checkpoint_manifest.h"
#include "tessera/engine/loss_scaler.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"
#include "tessera/engine/run_directory.h"

namespace tessera::engine {

struct TrainingPosition {
  int64_t step = 0;           // optimizer steps taken
  int64_t data_position = 0;  // the loader's next token
  LossScalerState loss_scaler;
};

inline constexpr const char* kModelFileName = "model.safetensors";
inline constexpr const char* kOptimizerFileName = "optimizer.safetensors";

// Writes both files into `directory` and returns them with their digests.
// The model file holds the optimizer's full-precision weights.
template <typename T>
Result<std::vector<CheckpointFile>> write_checkpoint_files(const std::string& directory, Transformer<T>& model, OptimizerShard& optimizer,
                                                           planner::OptimizerKind kind, const TrainingPosition& position);

// A sharded optimizer on several ranks: rank 0 writes model.safetensors from
// `weights` (the whole model in flat order, gathered) and every rank writes its
// optimizer shard as flat tensors ("exp_avg", "exp_avg_sq" or
// "momentum_buffer", the shard's length) into optimizer_shard_file_name(rank,
// ranks), with the rank and the rank count in the metadata.
std::string optimizer_shard_file_name(int rank, int ranks);
template <typename T>
Result<std::vector<CheckpointFile>> write_sharded_checkpoint_files(const std::string& directory, Transformer<T>& model, OptimizerShard& optimizer,
                                                                   planner::OptimizerKind kind, const TrainingPosition& position, int rank,
                                                                   int ranks, const float* weights);

// Resuming on the same number of ranks: this rank's pieces of the fp32
// weights from model.safetensors, and its optimizer shard file.
template <typename T>
Result<TrainingPosition> load_sharded_checkpoint(const CommittedCheckpoint& checkpoint, Transformer<T>& model, OptimizerShard& optimizer,
                                                 planner::OptimizerKind kind, int rank, int ranks);

// Restores DIR/model.safetensors into the parameters; names and shapes must match.
Status load_model_weights(const std::string& dir, Transformer<float>& model);

// Restores weights (and, in mixed precision, the parameters rounded from them)
// and optimizer states in place from a verified checkpoint.
template <typename T>
Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint& checkpoint, Transformer<T>& model, OptimizerShard& optimizer,
                                         planner::OptimizerKind kind);

}  // namespace tessera::engine
