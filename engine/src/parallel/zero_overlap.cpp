// ZeRO-1/2's reductions overlapped with backward; see zero_overlap.h.
#include "tessera/engine/parallel/zero_overlap.h"

#include <cstddef>
#include <utility>

namespace tessera::engine {
namespace {

std::byte* offset_by(void* base, int64_t elements, comm::DataType type) {
  return static_cast<std::byte*>(base) + static_cast<size_t>(elements) * comm::element_bytes(type);
}

}  // namespace

OverlappedZero2::OverlappedZero2(comm::Communicator& group, comm::DataType type, void* buckets, ZeroReductionMemory& memory,
                                 const planner::TensorInventory& inventory, const std::vector<planner::FlatParameter>& order, int64_t bucket_numel)
    : group_(group), type_(type), buckets_(buckets), memory_(memory), bucket_numel_(bucket_numel) {
  for (int b = 0; b < 2; ++b) book_.push_back(Bucket{Zero2Bucket(inventory, order, bucket_numel, group.size(), group.rank()), {}});
}

void* OverlappedZero2::at(int bucket, int64_t offset) const { return offset_by(buckets_, bucket * bucket_numel_ + offset, type_); }

size_t OverlappedZero2::in_flight() const { return book_[0].started.size() + book_[1].started.size(); }

// The bucket's runs, each reduce-scattered in place to the ranks owning its parts.
Status OverlappedZero2::start(int bucket) {
  std::vector<Zero2Run> runs = book_[static_cast<size_t>(bucket)].book.flush();
  if (runs.empty()) return Status::success();
  for (const Zero2Run& run : runs) {
    if (Status s = group_.start_reduce_scatter_v(at(bucket, run.bucket_offset), at(bucket, run.mine_in_bucket), run.counts, type_, comm::ReduceOp::sum); !s) {
      return s;
    }
  }
  book_[static_cast<size_t>(bucket)].started = std::move(runs);
  started_order_.push_back(bucket);
  return Status::success();
}

// The bucket's runs are the oldest in flight (the other bucket started after
// it): finished, this rank's parts added into its gradient shard.
Status OverlappedZero2::reclaim(int bucket) {
  std::vector<Zero2Run>& runs = book_[static_cast<size_t>(bucket)].started;
  if (runs.empty()) return Status::success();
  if (Status s = group_.finish_oldest(runs.size()); !s) return s;
  for (const Zero2Run& run : runs) {
    if (run.mine_numel == 0) continue;
    if (Status s = memory_.add_into_shard(run.mine_in_shard, at(bucket, run.mine_in_bucket), run.mine_numel); !s) return s;
  }
  runs.clear();
  started_order_.pop_front();
  return Status::success();
}

Result<std::vector<BoundGradient>> OverlappedZero2::before_backward(int layer) {
  if (Status s = group_.progress(); !s) return s.error();
  if (book_[static_cast<size_t>(filling_)].book.needs_flush(layer)) {
    if (Status s = start(filling_); !s) return s.error();
    filling_ = 1 - filling_;
    if (Status s = reclaim(filling_); !s) return s.error();
  }
  std::vector<BoundGradient> bound;
  for (const Zero2Placement& placed : book_[static_cast<size_t>(filling_)].book.place(layer)) {
    void* gradient = at(filling_, placed.bucket_offset);
    if (Status s = memory_.zero(gradient, placed.numel); !s) return s.error();
    bound.push_back({placed.parameter, gradient});
  }
  return bound;
}

Status OverlappedZero2::end_backward() {
  if (Status s = start(filling_); !s) return s;
  while (!started_order_.empty()) {
    if (Status s = reclaim(started_order_.front()); !s) return s;
  }
  return Status::success();
}

OverlappedZero1::OverlappedZero1(comm::Communicator& group, comm::DataType type, void* buckets, int bucket_count, ZeroReductionMemory& memory,
                                 BackwardCompletion completion, int64_t shard_numel, int64_t bucket_numel)
    : group_(group),
      type_(type),
      buckets_(buckets),
      bucket_count_(static_cast<size_t>(bucket_count)),
      memory_(memory),
      completion_(std::move(completion)),
      bucket_numel_(bucket_numel),
      pieces_(zero1_pieces(shard_numel, bucket_numel, group.size())),
      unstarted_(pieces_.size()) {}

// The piece into the next bucket, once that bucket's previous piece is done,
// and its in-place reduce-scatter started.
Status OverlappedZero1::start(size_t piece) {
  if (in_flight_.size() == bucket_count_) {
    if (Status s = reclaim_oldest(); !s) return s;  // the oldest is in the next bucket: they take the pieces in turn
  }
  const Zero1Piece& p = pieces_[piece];
  void* bucket = offset_by(buckets_, static_cast<int64_t>(next_bucket_) * bucket_numel_, type_);
  if (Status s = memory_.gather_piece(bucket, p.begin, p.numel); !s) return s;
  const std::vector<size_t> counts(static_cast<size_t>(group_.size()), static_cast<size_t>(p.numel));
  if (Status s = group_.start_reduce_scatter_v(bucket, offset_by(bucket, group_.rank() * p.numel, type_), counts, type_, comm::ReduceOp::sum); !s) return s;
  in_flight_.push_back({piece, next_bucket_});
  next_bucket_ = (next_bucket_ + 1) % bucket_count_;
  return Status::success();
}

Status OverlappedZero1::reclaim_oldest() {
  const InFlight oldest = in_flight_.front();
  if (Status s = group_.finish_oldest(1); !s) return s;
  const Zero1Piece& p = pieces_[oldest.piece];
  void* bucket = offset_by(buckets_, static_cast<int64_t>(oldest.bucket) * bucket_numel_, type_);
  if (Status s = memory_.scatter_piece(offset_by(bucket, group_.rank() * p.numel, type_), p.begin, p.numel); !s) return s;
  in_flight_.pop_front();
  return Status::success();
}

Status OverlappedZero1::after_backward(int layer) {
  const int64_t complete_from = completion_.complete_from(layer);
  while (unstarted_ > 0 && pieces_[unstarted_ - 1].begin >= complete_from) {
    if (Status s = start(--unstarted_); !s) return s;
  }
  return group_.progress();
}

Status OverlappedZero1::finish() {
  while (unstarted_ > 0) {
    if (Status s = start(--unstarted_); !s) return s;
  }
  while (!in_flight_.empty()) {
    if (Status s = reclaim_oldest(); !s) return s;
  }
  unstarted_ = pieces_.size();  // the next step's last backward starts them again
  return Status::success();
}

}  // namespace tessera::engine
