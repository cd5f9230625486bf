// A pipeline stage's share of a training step: the planner's own schedule
// table for this stage (planner/pipeline_stages.h, stage_schedule: GPipe, 1F1B
// or interleaved 1F1B) executed pass by pass, with the activations and their
// gradients passed between neighbouring stages (Narayanan et al. 2021,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM", §2.2).
//
// Each forward receives its input from the previous virtual stage (chunk j of
// stage s follows chunk j of stage s - 1, and chunk j of the last stage feeds
// chunk j + 1 of the first), keeps its micro-batch's tensors until that
// micro-batch's backward, and sends its output on; each backward receives the
// gradient of its output and sends the gradient of its input back.
//
// Buffers, as the planner's memory model counts them (memory_model.cpp,
// add_activations; Megatron-LM's p2p): per neighbouring stage one activation
// and one gradient of (b, s, h) (s/t under sequence parallelism) in the
// compute dtype, in comm_buffers. Receives block; sends are started and the
// next pass goes on, so two stages sending to each other never wait for each
// other (Megatron posts its sends and receives as one batch for the same
// reason); a send buffer is written again only after its last send completed.
// Activations and gradients travel under different tags, so that two stages
// exchanging both (pp = 2, interleaved) never take one for the other.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/model/transformer.h"
#include "tessera/engine/tensor.h"
#include "tessera/engine/timeline.h"
#include "tessera/planner/pipeline_stages.h"

namespace tessera::engine {

template <typename T>
class PipelineStage {
 public:
  using W = compute_t<T>;

  // `pipeline`: the stage's group ("pp"), its rank the stage; `net` built for that stage.
  PipelineStage(Transformer<T>& net, comm::Communicator& pipeline, MemoryLedger& ledger, planner::PipelineSchedule schedule, int64_t num_micro_batches);

  // Every pass of the stage's schedule over the step's micro-batches
  // (tokens[m] and targets[m], B·T each), the losses' gradients scaled by
  // `loss_scale`. Returns the mean loss over the micro-batches where the
  // stage holds the head, 0 elsewhere.
  Result<double> run_step(const std::vector<std::vector<int32_t>>& tokens, const std::vector<std::vector<int32_t>>& targets, W loss_scale,
                          Timeline& timeline);
  // A dry run's step: every pass's tensors booked and freed in the schedule's order, nothing computed or sent.
  void replay_step();

 private:
  static constexpr int kActivationTag = 0;
  static constexpr int kGradientTag = 1;

  int virtual_stage(int64_t chunk) const { return static_cast<int>(chunk) * pp_ + stage_; }
  bool first_virtual(int64_t chunk) const { return virtual_stage(chunk) == 0; }
  bool last_virtual(int64_t chunk) const { return virtual_stage(chunk) == pp_ * net_.num_chunks() - 1; }
  int previous() const { return (stage_ + pp_ - 1) % pp_; }
  int next() const { return (stage_ + 1) % pp_; }
  Result<double> forward(const planner::PipelineOp& op, const int32_t* tokens, const int32_t* targets);
  Status backward(const planner::PipelineOp& op, W loss_scale);

  Transformer<T>& net_;
  comm::Communicator& pipeline_;
  const int pp_, stage_;
  const int64_t micro_batches_;
  const std::vector<planner::PipelineOp> schedule_;
  Tensor<T> recv_activation_, send_activation_, recv_gradient_, send_gradient_;
};

}  // namespace tessera::engine
