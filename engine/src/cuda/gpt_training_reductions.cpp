// The data-parallel side of one GPU's training step (gpt_training_state.h):
// the hooks that run before and after each layer's forward and backward
// (ZeRO's buckets, Gemini's chunks, FSDP's units, DDP's buckets started as
// their layers complete), the sequence-parallel norms' gradient sums, and the
// reductions the optimizer waits for, finished also after a failed step.
#include "gpt_training_state.h"

namespace tessera::engine::cuda {

// Starts the all-reduce of buckets [started_buckets, complete) once the
// backward queued on the compute stream has written them: the
// communicator's stream waits for an event recorded on the compute stream here (comm/nccl.h).
void GptTraining::State::start_buckets(size_t complete) {
  for (; started_buckets < complete; ++started_buckets) {
    const DdpBucket& b = buckets->buckets()[started_buckets];
    check(group->start_all_reduce(grads.as<T>() + b.begin, grads.as<T>() + b.begin, static_cast<size_t>(b.end - b.begin), comm::ReduceOp::sum));
  }
}

// Whether DDP's buckets start during backward. Not under tensor
// parallelism: backward's tensor-parallel all-reduces run on the tp
// communicator, and a bucket's all-reduce running meanwhile on the dp one
// is two NCCL communicators in flight at once on one GPU, which NCCL does
// not promise to make progress (NCCL user guide, "Using multiple NCCL
// communicators concurrently": operations on different communicators at
// different epochs, submitted in the same order on every rank; CUDA does
// not guarantee that their kernels run concurrently, so each rank's could
// wait for the other's: NVIDIA/nccl issue 195, the maintainers' answer).
// There every bucket starts after backward's last tp all-reduce
// (finish_reductions) and is finished before the next one (the norm's).
// hybrid_parallel's ZeRO keeps the same rule by its one bucket
// (planner::hybrid_zero_buckets): its reduce-scatters, too, all start in
// finish_reductions, and each is finished before the next call.
// Nor in a pipeline, whose stage's gradients are complete only after the
// schedule's last backward (as the CPU trainer reduces them, run_pipeline).
// Nor under context parallelism, whose ring's send_recvs in backward run on the context group.
bool GptTraining::State::buckets_overlap_backward() const { return tp.size() == 1 && pipeline == nullptr && context == nullptr; }

// Around `layer`'s backward, in every micro-batch's: ZeRO-2's buckets bind
// the layer's gradients and start a full one's reduction; Gemini gathers the
// layer's chunks, opens their gradient chunks and reduces those complete;
// DDP and ZeRO-1 start the buckets or pieces the layer completed, in the
// step's last backward (`reduce`).
// FSDP gathers the layer's unit (and prefetches the next), opens its
// gradient, and after the backward starts its reduce-scatter (fsdp_schedule.h).
void GptTraining::State::before_layer_backward(int layer) {
  if (zero) check(zero->before_backward(layer, gradient_of));
  if (gemini) check(gemini->use_layer(layer, true));
  if (fsdp) check(fsdp->before_backward(layer));
}

// Before `layer`'s forward: Gemini gathers its chunks and binds its
// parameters, FSDP its unit (and the next); after a block's forward FSDP may release it.
void GptTraining::State::before_layer_forward(int layer) {
  if (gemini) check(gemini->use_layer(layer, false));
  if (fsdp) check(fsdp->before_forward(layer));
}

void GptTraining::State::after_layer_forward(int layer) {
  if (fsdp) check(fsdp->after_forward(layer));
}

void GptTraining::State::after_layer_backward(int layer, bool reduce) {
  if (zero) return check(zero->after_backward(layer, reduce));
  if (gemini) return;  // its moves reduce the gradient chunks
  if (fsdp) return check(fsdp->after_backward(layer));
  if (reduce && group != nullptr && buckets_overlap_backward()) start_buckets(buckets->complete_after(layer));
}

// Under sequence parallelism, after the step's last backward (which, under
// tensor parallelism, started no bucket: buckets_overlap_backward): the
// norms' gradients, from this rank's tokens only, summed over the
// tensor-parallel group; finish_reductions then starts every DDP bucket, in
// the CPU trainer's order (Transformer::reduce_sequence_parallel_gradients,
// then the gradient reduction). Under hybrid_parallel's ZeRO they are in
// its full gradient buffer still (its one bucket is reduced after this);
// tp and Gemini do not meet (gpu_plugins.h).
void GptTraining::State::reduce_sequence_parallel_gradients() {
  if (!sequence_parallel()) return;
  for (int index : norm_parameters(slots.blocks, slots.final_norm_w, slots.final_norm_b)) tp.sum(grad(index), order[static_cast<size_t>(index)].numel);
}

// The optimizer reads the gradients only after every bucket's sum has arrived (ZeRO: its shard's).
void GptTraining::State::finish_reductions() {
  if (zero) return check(zero->reduce());
  if (gemini) return check(gemini->reduce());
  if (fsdp) return check(fsdp->reduce());
  if (group == nullptr) return;
  start_buckets(buckets->buckets().size());  // all of them here under tensor parallelism (buckets_overlap_backward)
  started_buckets = 0;
  check(group->finish_started());
}

// After a failed step: reductions it started still own their buffers (the
// gradients, ZeRO's buckets) on the communicator's stream. They are
// finished, or the communicator aborted at its timeout (comm/nccl.h),
// before the step's owner frees those buffers: cudaFree would otherwise wait
// for NCCL kernels whose peers may never join.
void GptTraining::State::finish_started_after_failure() {
  if (group != nullptr && group->started_calls() > 0) (void)group->finish_started();
  started_buckets = 0;
}

}  // namespace tessera::engine::cuda
