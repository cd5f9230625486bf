// ZeRO-1/2's gradient reduction overlapped with backward, as host logic that
// the CPU engine's low_level_zero (data_parallel.h) and the GPU step's
// (cuda/zero_shards.h) share: which of the two reduce buckets a layer's
// gradients go to, when a bucket's reduce-scatter starts (a started
// collective, Communicator::start_reduce_scatter_v: MPI's nonblocking
// exchange, NCCL's queued on the communicator's stream while the compute
// stream goes on), and when a bucket may be reused: only after its started
// reduction has finished (Communicator::finish_oldest) and this rank's reduced
// parts have been taken out of it. DeepSpeed's ZeRO-1/2 with overlap_comm
// does the same with its two buffers (deepspeed/runtime/zero/stage_1_and_2.py
// at edaa722: reduce_independent_p_g_buckets_and_remove_grads swaps
// bucket.index after starting a bucket's reduction; average_tensor makes the
// compute stream wait for the reduction stream before the next bucket is
// filled). The buckets' sizes and count are the planner's
// (planner::zero_reduce_buckets).
//
// What touches memory is the engine's (ZeroReductionMemory: host loops in the
// CPU engine, device copies and kernels on the compute stream in the GPU
// step), so the order of the collectives and the reductions' operands are the
// same in both engines and in the tests, which run this logic with a fake
// communicator whose started calls complete only when waited for
// (tests/engine/zero_overlap_test.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/parallel/ddp_buckets.h"
#include "tessera/engine/parallel/zero_buckets.h"

namespace tessera::engine {

// The engine's memory operations, on elements of the gradients' type.
class ZeroReductionMemory {
 public:
  virtual ~ZeroReductionMemory() = default;
  // Zeroes `numel` elements at `at` (a layer's gradients placed in a bucket).
  virtual Status zero(void* at, int64_t numel) = 0;
  // gradient_shard[offset, + numel) += reduced[0, numel), rounded once per
  // element (the CPU engine's residual_sum; the GPU's residual_add).
  virtual Status add_into_shard(int64_t offset, const void* reduced, int64_t numel) = 0;
  // Stage 1: every rank r's part [r · shard + begin, + numel) of the full
  // gradients to bucket[r · numel, (r + 1) · numel).
  virtual Status gather_piece(void* bucket, int64_t begin, int64_t numel) = 0;
  // Stage 1: this rank's reduced part over [rank · shard + begin, + numel) of the full gradients.
  virtual Status scatter_piece(const void* reduced, int64_t begin, int64_t numel) = 0;
};

// A layer's gradient bound to its place in a bucket.
struct BoundGradient {
  int parameter = 0;  // flat-order index
  void* gradient = nullptr;
};

// Stage 2 with two buckets smaller than the padded model: each bucket keeps
// its book as Zero2Bucket does (placements from its end down, flushed as runs
// of the flat order). Before each layer's backward, when the layer does not
// fit in the bucket being filled, that bucket's runs are started and the
// other bucket becomes the one filled, once its own runs have finished and
// their parts were added into the gradient shard. After the embeddings'
// backward the last bucket is started and both are finished, oldest first,
// so the shard's additions come in the order of the blocking flushes.
class OverlappedZero2 {
 public:
  // `buckets`: 2 · bucket_numel elements of `type`, bucket b at b · bucket_numel.
  OverlappedZero2(comm::Communicator& group, comm::DataType type, void* buckets, ZeroReductionMemory& memory, const planner::TensorInventory& inventory,
                  const std::vector<planner::FlatParameter>& order, int64_t bucket_numel);

  // Before `layer`'s backward (a block index, num_layers for the head,
  // planner::kEmbeddingLayer), in every backward: where its gradients go,
  // zeroed; started reductions are moved along (Communicator::progress).
  Result<std::vector<BoundGradient>> before_backward(int layer);
  // After the embeddings' backward: the gradient shard holds this backward's reduced gradients too.
  Status end_backward();
  // Reduce-scatters started and not yet finished (for the tests).
  size_t in_flight() const;

 private:
  struct Bucket {
    Zero2Bucket book;
    std::vector<Zero2Run> started;  // its runs in flight
  };
  void* at(int bucket, int64_t offset) const;
  Status start(int bucket);
  Status reclaim(int bucket);

  comm::Communicator& group_;
  comm::DataType type_;
  void* buckets_;
  ZeroReductionMemory& memory_;
  int64_t bucket_numel_;
  std::vector<Bucket> book_;
  int filling_ = 0;
  std::deque<int> started_order_;  // the buckets with runs in flight, oldest first
};

// Stage 1: in the step's last backward each piece of the shards
// (zero1_pieces) is copied into a bucket and its reduce-scatter started as
// soon as its gradients are complete on every rank's shard
// (BackwardCompletion: the piece's range in rank 0's shard, the lowest, is
// complete), the last pieces first, as DDP starts its buckets; before a
// bucket takes a new piece, its previous piece's reduction is finished and
// this rank's part copied back over its shard. The buckets take the pieces in
// turn: with two, one is reduced while the other is filled; with one (one
// piece, or an engine that does not overlap: hybrid_parallel), finish()
// reduces the pieces one after another after backward.
class OverlappedZero1 {
 public:
  // `buckets`: bucket_count · bucket_numel elements of `type`.
  OverlappedZero1(comm::Communicator& group, comm::DataType type, void* buckets, int bucket_count, ZeroReductionMemory& memory,
                  BackwardCompletion completion, int64_t shard_numel, int64_t bucket_numel);

  // After `layer`'s backward in the step's last backward: starts the pieces it completed.
  Status after_backward(int layer);
  // After the step's last backward: starts the rest and finishes every piece;
  // this rank's shard of the full gradients holds the sum over the ranks.
  Status finish();
  size_t in_flight() const { return in_flight_.size(); }

 private:
  Status start(size_t piece);
  Status reclaim_oldest();

  comm::Communicator& group_;
  comm::DataType type_;
  void* buckets_;
  size_t bucket_count_;
  ZeroReductionMemory& memory_;
  BackwardCompletion completion_;
  int64_t bucket_numel_;
  std::vector<Zero1Piece> pieces_;
  size_t unstarted_ = 0;  // pieces [0, unstarted_) are not started yet
  struct InFlight {
    size_t piece;
    size_t bucket;
  };
  std::deque<InFlight> in_flight_;  // oldest first
  size_t next_bucket_ = 0;
};

}  // namespace tessera::engine
