// A model's tensor-parallel group (Megatron-LM, Shoeybi et al. 2019, §3):
// each rank holds its part of every split layer (planner/tensor_parallel.h)
// and the layers meet in two places. After a row-parallel layer (attention
// output, MLP down projection, the head's input gradient) each rank holds a
// partial sum of the output, and the group all-reduces it (Megatron's g in
// forward, f in backward); a column-parallel layer's input gradient is
// likewise partial and all-reduced before the norm below it. Everything
// else (norms, residuals, the loss) is computed whole and identical on every rank.
//
// The vocabulary is split too: rank r holds rows [r · ⌈V/tp⌉, ...) of the
// embedding and the head, looks up only its own tokens (the others' rows are
// zero until the all-reduce) and computes the cross-entropy from per-row
// maxima, sums and target logits reduced over the group, never gathering the
// logits (Megatron-LM's vocab_parallel_cross_entropy).
//
// Errors: the first communication failure is kept (status()) and later
// collectives are skipped; the caller checks after each pass.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessera/engine/comm/communicator.h"

namespace tessera::engine {

class TensorParallel {
 public:
  TensorParallel() = default;  // one rank
  explicit TensorParallel(comm::Communicator* group) : group_(group != nullptr && group->size() > 1 ? group : nullptr) {}

  int64_t size() const { return group_ != nullptr ? group_->size() : 1; }
  int64_t rank() const { return group_ != nullptr ? group_->rank() : 0; }
  bool split() const { return group_ != nullptr; }

  // x[i] = op over the group of x[i], i < n, in place (nothing on one rank).
  template <comm::CommElement T>
  void all_reduce(T* x, int64_t n, comm::ReduceOp op = comm::ReduceOp::sum) {
    if (group_ == nullptr || !status_.ok()) return;
    status_ = group_->all_reduce(x, x, static_cast<size_t>(n), op);
  }

  // This rank's vocabulary rows: [vocab_begin(V), + vocab_rows(V)) of the
  // padded vocabulary, of which vocab_valid(V) are real tokens.
  int64_t vocab_rows(int64_t vocab) const { return (vocab + size() - 1) / size(); }
  int64_t vocab_begin(int64_t vocab) const { return rank() * vocab_rows(vocab); }
  int64_t vocab_valid(int64_t vocab) const { return std::clamp<int64_t>(vocab - vocab_begin(vocab), 0, vocab_rows(vocab)); }

  const Status& status() const { return status_; }

 private:
  comm::Communicator* group_ = nullptr;
  Status status_ = Status::success();
};

}  // namespace tessera::engine
