// A pipeline stage's part of one GPU's training step (gpt_training_state.h):
// its forward and backward passes run in the planner's schedule with the
// send_recvs between them (parallel/pipeline_transfers.h), then a tied
// embedding's gradient summed between the first and the last stage.
#include "gpt_training_state.h"

#include <algorithm>
#include <cstddef>

#include "tessera/engine/gradient_accumulation.h"
#include "tessera/engine/parallel/pipeline_transfers.h"

namespace tessera::engine::cuda {

// One send_recv of the stage's schedule (parallel/pipeline_transfers.h): the
// last pass's output from its send buffer, the next pass's input into its
// receive buffer. NCCL's call waits for the compute stream's queued work
// first and returns when both halves have completed (comm/nccl.h).
void GptTraining::State::exchange(const PipelineTransfer& transfer) {
  const T* send = transfer.send.gradient ? boundaries.send_gradient.as<T>() : boundaries.send_activation.as<T>();
  T* recv = transfer.recv.gradient ? boundaries.recv_gradient.as<T>() : boundaries.recv_activation.as<T>();
  check(pipeline->send_recv(send, transfer.send.peer, recv, transfer.recv.peer, static_cast<size_t>(boundary_numel())));
}

// The stage's passes in the planner's order over the step's micro-batches
// ((k, B, T) tokens and targets each), each forward's activations kept until
// its backward, the calls before each pass that the schedule makes there;
// then a tied embedding's gradient summed between the first and the last
// stage. Returns the mean loss on the last stage, 0 elsewhere.
double GptTraining::State::run_pipeline(const int32_t* tokens, const int32_t* targets, int64_t micro_batches, double gradient_scale) {
  const StageTransfers step = stage_transfers(schedule, stage.pp, stage.stage, micro_batches, stage.chunks);
  size_t made = 0;  // the transfers made so far
  const auto exchange_before = [&](size_t pass) {
    for (; made < step.transfers.size() && step.transfers[made].before_pass == pass; ++made) exchange(step.transfers[made]);
  };
  double loss = 0;
  for (size_t i = 0; i < step.passes.size(); ++i) {
    exchange_before(i);
    const planner::PipelineOp& op = step.passes[i];
    const int64_t first = op.micro_batch * N;
    if (op.pass == planner::PipelinePass::forward) {
      activations.begin_pass(op.chunk, op.micro_batch);
      const double pass_loss = forward(tokens + first, targets + first, gradient_scale, boundaries.recv_activation.as<T>(),
                                       boundaries.send_activation.as<T>(), op.chunk);
      loss = add_micro_batch_loss(loss, pass_loss, micro_batches);
    } else {
      activations.use_pass(op.chunk, op.micro_batch);
      backward(false, boundaries.recv_gradient.as<T>(), boundaries.send_gradient.as<T>(), op.chunk);
      activations.end_pass(op.chunk, op.micro_batch);
    }
  }
  exchange_before(step.passes.size());
  sum_tied_embedding_gradients();
  return loss;
}

// Megatron-LM sums the word embeddings' gradients between the first and the
// last stage after backward (finalize_model_grads.py,
// _allreduce_word_embedding_grads), as the CPU trainer does
// (sum_tied_embedding_gradients), so both copies take the same step.
// Before DDP's buckets or ZeRO-1's reduce-scatters start (finish_reductions):
// each rank of a stage's dp group sums its own micro-batches' copy with its
// peer stage's, and ZeRO's shard then holds the sum over both and over dp.
// In pieces of a DDP bucket, so that its rank-order scratch (comm/nccl.h) is
// never more than the planner books (memory_model.cpp, tied_sum_scratch_bytes).
void GptTraining::State::sum_tied_embedding_gradients() {
  if (embedding == nullptr) return;
  const int index = first_stage() ? slots.wte : slots.head;
  const int64_t numel = order[static_cast<size_t>(index)].numel;
  for (int64_t begin = 0; begin < numel; begin += tied_piece_numel) {
    const auto count = static_cast<size_t>(std::min(tied_piece_numel, numel - begin));
    check(embedding->all_reduce(grad(index) + begin, grad(index) + begin, count, comm::ReduceOp::sum));
  }
}

}  // namespace tessera::engine::cuda
