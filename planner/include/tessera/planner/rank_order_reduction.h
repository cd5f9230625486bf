// The memory Tessera's engine stages to sum gradients in rank order on GPUs
// (engine/comm/nccl.h): each all-reduce of n elements over p ranks brings
// every rank's copy of this rank's chunk (⌊n/p⌋ or ⌈n/p⌉ elements, the
// balanced chunks of engine/comm/chunk_layout.h) into one scratch buffer,
// reduces it there in rank order and sends the result back, so that every
// rank's sum is the same bits. The engine books it under comm_buffers while
// the call is queued; calls run one after another on the communicator's
// stream, so one call's scratch is held at a time. PyTorch DDP's
// ncclAllReduce stages nothing outside NCCL's own buffers (the `workspace`
// assumption), so the planner counts this only where the request says the
// engine runs the reduction (PluginOptions::rank_order_reduction).
#pragma once

#include <cstdint>

namespace tessera::planner {

// The elements of one of the engine's DDP buckets (engine/parallel/ddp_buckets.h):
// ranges of the flat gradients of at most `bucket_bytes`, at least one element.
constexpr int64_t ddp_bucket_numel(int64_t bucket_bytes, int64_t element_bytes) {
  const int64_t numel = bucket_bytes / element_bytes;
  return numel < 1 ? 1 : numel;
}

// The scratch of one all-reduce of `count` elements over `ranks` on the rank
// with the largest chunk: ranks · ⌈count / ranks⌉ elements.
constexpr int64_t rank_order_scratch_bytes(int64_t count, int64_t ranks, int64_t element_bytes) {
  return (count + ranks - 1) / ranks * ranks * element_bytes;
}

// The largest scratch of a DDP step over `params` flat gradients: that of its
// largest bucket (the first cut from the end of the flat order, unless the
// gradients are fewer).
constexpr int64_t ddp_rank_order_scratch_bytes(int64_t params, int64_t bucket_bytes, int64_t ranks, int64_t element_bytes) {
  const int64_t bucket = ddp_bucket_numel(bucket_bytes, element_bytes);
  return rank_order_scratch_bytes(bucket < params ? bucket : params, ranks, element_bytes);
}

}  // namespace tessera::planner
