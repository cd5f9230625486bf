// Checkpoints: DIR/model.safetensors holds the parameters under their Hugging
// Face names (so transformers can load a GPT-2 checkpoint); DIR/optimizer.safetensors
// holds the optimizer states ("<name>.exp_avg", "<name>.exp_avg_sq" or
// "<name>.momentum_buffer") and, as metadata, the step, the data position and
// the fp16 loss scaler's state. Mixed-precision runs save their fp32 master
// weights, so a checkpoint always holds the weights at full precision.
// Both are written atomically, so a failed save keeps the previous checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/engine/loss_scaler.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/optimizer.h"

namespace tessera::engine {

struct TrainingPosition {
  int64_t step = 0;           // optimizer steps taken
  int64_t data_position = 0;  // the loader's next token
  LossScalerState loss_scaler;
};

template <typename T>
Status save_checkpoint(const std::string& dir, Transformer<T>& model, Optimizer<T>& optimizer, planner::OptimizerKind kind,
                       const TrainingPosition& position);

// Restores the parameters from DIR/model.safetensors; names and shapes must match.
Status load_model_weights(const std::string& dir, Transformer<float>& model);

// Restores weights (and, in mixed precision, the parameters rounded from them)
// and optimizer states in place; names and shapes must match.
template <typename T>
Result<TrainingPosition> load_checkpoint(const std::string& dir, Transformer<T>& model, Optimizer<T>& optimizer, planner::OptimizerKind kind);

}  // namespace tessera::engine
