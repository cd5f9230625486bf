#include "tessera/engine/parallel/pipeline.h"

namespace tessera::engine {

template <typename T>
PipelineStage<T>::PipelineStage(Transformer<T>& net, comm::Communicator& pipeline, MemoryLedger& ledger, planner::PipelineSchedule schedule,
                                int64_t num_micro_batches)
    : net_(net), pipeline_(pipeline), pp_(pipeline.size()), stage_(pipeline.rank()), micro_batches_(num_micro_batches),
      schedule_(planner::stage_schedule(schedule, pp_, stage_, num_micro_batches, net.num_chunks())) {
  const int64_t n = net.boundary_numel();
  // Interleaved, every stage has both neighbours (the wrap-around between the last and the first).
  const bool interleaved = net.num_chunks() > 1;
  if (interleaved || stage_ > 0) {  // from the previous stage, and back to it
    recv_activation_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, n);
    send_gradient_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, n);
  }
  if (interleaved || stage_ < pp_ - 1) {  // to the next stage, and back from it
    send_activation_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, n);
    recv_gradient_ = Tensor<T>(ledger, MemoryCategory::comm_buffers, n);
  }
}

template <typename T>
Result<double> PipelineStage<T>::forward(const planner::PipelineOp& op, const int32_t* tokens, const int32_t* targets) {
  const int chunk = static_cast<int>(op.chunk);
  const auto n = static_cast<size_t>(net_.boundary_numel());
  net_.begin_pass(chunk, op.micro_batch);
  if (!first_virtual(chunk)) {
    if (Status s = pipeline_.recv(recv_activation_.data(), n, previous(), kActivationTag); !s) return s.error();
  }
  T* output = nullptr;
  if (!last_virtual(chunk)) {
    if (Status s = pipeline_.finish_send(send_activation_.data()); !s) return s.error();
    output = send_activation_.data();
  }
  const double loss = net_.forward_chunk(chunk, op.micro_batch, tokens, targets, recv_activation_.data(), output);
  if (!net_.communication_status().ok()) return net_.communication_status().error();
  if (output != nullptr) {
    if (Status s = pipeline_.start_send(output, n, next(), kActivationTag); !s) return s.error();
  }
  return loss;
}

template <typename T>
Status PipelineStage<T>::backward(const planner::PipelineOp& op, W loss_scale) {
  const int chunk = static_cast<int>(op.chunk);
  const auto n = static_cast<size_t>(net_.boundary_numel());
  if (!last_virtual(chunk)) {
    if (Status s = pipeline_.recv(recv_gradient_.data(), n, next(), kGradientTag); !s) return s;
  }
  T* input_grad = nullptr;
  if (!first_virtual(chunk)) {
    if (Status s = pipeline_.finish_send(send_gradient_.data()); !s) return s;
    input_grad = send_gradient_.data();
  }
  net_.backward_chunk(chunk, op.micro_batch, loss_scale, recv_gradient_.data(), input_grad);
  net_.end_pass(chunk, op.micro_batch);
  if (!net_.communication_status().ok()) return net_.communication_status();
  if (input_grad != nullptr) return pipeline_.start_send(input_grad, n, previous(), kGradientTag);
  return Status::success();
}

template <typename T>
Result<double> PipelineStage<T>::run_step(const std::vector<std::vector<int32_t>>& tokens, const std::vector<std::vector<int32_t>>& targets,
                                          W loss_scale, Timeline& timeline) {
  double loss = 0;
  for (const planner::PipelineOp& op : schedule_) {
    const auto m = static_cast<size_t>(op.micro_batch);
    const auto start = Timeline::Clock::now();
    if (op.pass == planner::PipelinePass::forward) {
      auto pass_loss = forward(op, tokens[m].data(), targets[m].data());
      if (!pass_loss) return pass_loss.error();
      loss += pass_loss.value() / static_cast<double>(micro_batches_);
      timeline.record(TimelineKind::forward, TimelineLane::compute, start, Timeline::Clock::now(), op.micro_batch);
    } else {
      if (Status s = backward(op, loss_scale); !s) return s.error();
      timeline.record(TimelineKind::backward, TimelineLane::compute, start, Timeline::Clock::now(), op.micro_batch);
    }
  }
  if (Status s = pipeline_.finish_sends(); !s) return s.error();
  return loss;
}

template <typename T>
void PipelineStage<T>::replay_step() {
  for (const planner::PipelineOp& op : schedule_) {
    if (op.pass == planner::PipelinePass::forward) {
      net_.begin_pass(static_cast<int>(op.chunk), op.micro_batch);
    } else {
      net_.end_pass(static_cast<int>(op.chunk), op.micro_batch);
    }
  }
}

template class PipelineStage<float>;
template class PipelineStage<bf16>;
template class PipelineStage<fp16>;

}  // namespace tessera::engine
