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
#include <map>
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
// ranks), with the rank, the rank count and `layout` (shard_layout_metadata)
// in the metadata, so that another layout can read them. sharded_checkpoint.h
// has the collective that gathers the weights and the digests around it.
std::string optimizer_shard_file_name(int rank, int ranks);
Result<std::vector<CheckpointFile>> write_sharded_checkpoint_files(const std::string& directory, const planner::Model& model, OptimizerShard& optimizer,
                                                                   planner::OptimizerKind kind, const TrainingPosition& position, int rank, int ranks,
                                                                   const float* weights, const std::map<std::string, std::string>& layout);
// What a shard file records of the layout that wrote it: the plugin, and
// Gemini's chunk size over `dp` ranks (planner/optimizer_layout.h re-derives
// the pieces from them).
std::map<std::string, std::string> shard_layout_metadata(const planner::Model& model, const planner::PluginOptions& plugin, int64_t dp);

// A tensor-parallel run's checkpoint is consolidated: rank 0 of the world
// writes model.safetensors and optimizer.safetensors as a one-rank run would,
// every tensor whole (its Hugging Face shape, from `model`'s inventory), from
// the gathered flat `weights` and `states` (the whole model in flat order), so
// that it loads into any layout. `optimizer` gives the metadata (updates taken).
Result<std::vector<CheckpointFile>> write_consolidated_checkpoint_files(const std::string& directory, const planner::Model& model,
                                                                       const float* weights, const std::vector<const float*>& states,
                                                                       const OptimizerShard& optimizer, planner::OptimizerKind kind,
                                                                       const TrainingPosition& position);

// Which part of every tensor this rank holds under tensor parallelism.
struct TensorParallelRank {
  int64_t size = 1, rank = 0;
};

// Restores DIR/model.safetensors into the parameters; names and shapes must match.
Status load_model_weights(const std::string& dir, Transformer<float>& model);

// Restores the optimizer's pieces of the fp32 weights (and, in mixed
// precision, the parameters rounded from them) and of the optimizer states,
// in place, from a verified checkpoint: from optimizer.safetensors' whole
// tensors, or from the shard files of whatever plugin and rank count saved
// them (their metadata says; planner/optimizer_layout.h maps saved pieces to
// this rank's), so a checkpoint loads into another layout or dp size. Under
// tensor parallelism (`tp`) each piece is this rank's part of the whole
// tensors of model.safetensors and optimizer.safetensors
// (planner::for_each_tp_element); shard files, which hold pieces of a
// data-parallel layout, load into tp 1 only.
template <typename T>
Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& description, Transformer<T>& model,
                                         OptimizerShard& optimizer, planner::OptimizerKind kind, TensorParallelRank tp = {});

// What loading needs of the model: its parameters' names and this rank's
// shapes of them, in flat order (a Transformer's, or a whole model's inventory).
struct ParameterNames {
  const std::vector<std::string>& names;
  const std::vector<std::vector<int64_t>>& shapes;
};
// load_checkpoint for parameters held elsewhere than a Transformer (the GPU
// step's, flat_checkpoint.h): only the optimizer's pieces are restored.
Result<TrainingPosition> load_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& description, const ParameterNames& model,
                                         OptimizerShard& optimizer, planner::OptimizerKind kind, TensorParallelRank tp = {});

}  // namespace tessera::engine
