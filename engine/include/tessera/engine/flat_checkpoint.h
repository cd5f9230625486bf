// Checkpoints of a training step that keeps its model states outside the CPU
// engine's Transformer and Optimizer (the GPU step, cuda/gpt_training.h): it
// copies AdamW's fp32 master weights and two states, for the whole model in
// flat order, into a FlatAdamWState on the host, and that is saved and
// restored with the CPU engine's own functions and files (checkpoint.h:
// model.safetensors with the fp32 weights under their Hugging Face names,
// optimizer.safetensors with exp_avg, exp_avg_sq and the position), so either
// engine resumes the other's checkpoints. Under ZeRO (low_level_zero) the
// state is the rank's shard only, laid out by planner/optimizer_layout.h, and
// saved as the CPU engine's ZeRO saves it (sharded_checkpoint.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/engine/checkpoint.h"
#include "tessera/engine/optimizer.h"
#include "tessera/planner/model.h"
#include "tessera/planner/optimizer_layout.h"

namespace tessera::engine {

class FlatAdamWState final : public OptimizerShard {
 public:
  // Zeros, sized for `model`'s parameters.
  explicit FlatAdamWState(const planner::Model& model);
  // Zeros, sized for one rank's shard of `layout` (planner::optimizer_layout).
  explicit FlatAdamWState(planner::OptimizerLayout layout);

  const std::vector<planner::ShardPiece>& pieces() const override { return pieces_; }
  int64_t numel() const override { return static_cast<int64_t>(weights_.size()); }
  float* weights() override { return weights_.data(); }
  float* state(int s) override { return s == 0 ? exp_avg_.data() : exp_avg_sq_.data(); }
  int64_t steps_taken() const override { return steps_; }
  void set_steps_taken(int64_t steps) override { steps_ = steps; }
  void weights_restored() override {}  // the step that owns the parameters rounds them itself

 private:
  std::vector<planner::ShardPiece> pieces_;  // every parameter whole, or a shard's pieces
  std::vector<float> weights_, exp_avg_, exp_avg_sq_;
  int64_t steps_ = 0;
};

// model.safetensors and optimizer.safetensors of `state` in `directory`, as
// a one-rank CPU run of AdamW writes them.
Result<std::vector<CheckpointFile>> write_flat_checkpoint_files(const std::string& directory, const planner::Model& model, FlatAdamWState& state,
                                                                const TrainingPosition& position);

// Restores `state` (its pieces) from a verified checkpoint by
// load_checkpoint's rules (whole files, or the shard files of any plugin and
// rank count); under tensor parallelism (`tp`) `state` holds this rank's part
// of `model` (planner::tp_rank_model), loaded from the whole tensors.
Result<TrainingPosition> load_flat_checkpoint(const CommittedCheckpoint& checkpoint, const planner::Model& model, FlatAdamWState& state,
                                              TensorParallelRank tp = {});

}  // namespace tessera::engine
