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
// Sequence parallelism (Korthikanti et al. 2022, §4.2.2): outside the split
// layers each rank keeps only its share of the tokens, rows [r · N/tp, (r+1) ·
// N/tp) of every (N, h) tensor. Before a column-parallel layer the norm's
// output is all-gathered (whole sequence), and a row-parallel layer's partial
// output is reduce-scattered instead of all-reduced; backward mirrors both.
// Norm weights then see only this rank's tokens: their gradients are summed
// over the group once per step (Megatron-LM's all-reduce of the layer-norm
// gradients), see Transformer::reduce_sequence_parallel_gradients.
//
// With --tp-comm-overlap (TpCommunication::overlapped) the all-gathers before
// the column-parallel GEMMs and the reduce-scatters after the GEMMs whose
// partial sums they reduce move chunk by chunk under those GEMMs
// (model/sequence_overlap.h); the GEMMs then run on one rank's rows at a time.
//
// Errors: the first communication failure is kept (status()) and later
// collectives are skipped; the caller checks after each pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/model/sequence_overlap.h"

namespace tessera::engine {

// Under sequence parallelism each of `tp` ranks keeps an equal share of a
// micro-batch's tokens (under context parallelism, of the local_seq_len
// tokens of each sequence its cp rank holds): a one-line error where tp does
// not divide them (the CPU model and the GPU step alike).
inline Status check_sequence_split(int64_t micro_batch, int64_t local_seq_len, int64_t tp, int64_t cp = 1) {
  if ((micro_batch * local_seq_len) % tp == 0) return Status::success();
  const std::string context = cp > 1 ? " on each of the " + std::to_string(cp) + " context-parallel ranks" : "";
  return make_error(ErrorCode::invalid_argument, "--seq " + std::to_string(local_seq_len * cp) + ": sequence parallelism gives each of the " +
                                                     std::to_string(tp) + " tensor-parallel ranks an equal share of the micro-batch's " +
                                                     std::to_string(micro_batch * local_seq_len) + " tokens" + context + "; choose a --seq that --tp" +
                                                     (cp > 1 ? " × --cp" : "") + " divides");
}

// How sequence parallelism's all-gathers and reduce-scatters beside the GEMMs
// run: as collectives between the GEMMs, or overlapped with them (--tp-comm-overlap).
enum class TpCommunication { collectives, overlapped };

class TensorParallel {
 public:
  TensorParallel() = default;  // one rank
  TensorParallel(comm::Communicator* group, bool sequence_parallel, TpCommunication communication = TpCommunication::collectives)
      : group_(group != nullptr && group->size() > 1 ? group : nullptr),
        sequence_parallel_(sequence_parallel && group_ != nullptr),
        overlapped_(sequence_parallel_ && communication == TpCommunication::overlapped) {}

  int64_t size() const { return group_ != nullptr ? group_->size() : 1; }
  int64_t rank() const { return group_ != nullptr ? group_->rank() : 0; }
  bool sequence_parallel() const { return sequence_parallel_; }
  bool overlapped() const { return overlapped_; }
  // Rows of an (N, h) tensor outside the split layers that this rank keeps, and the first of them.
  int64_t local_rows(int64_t rows) const { return sequence_parallel_ ? rows / size() : rows; }
  int64_t first_row(int64_t rows) const { return sequence_parallel_ ? rank() * local_rows(rows) : 0; }

  // whole (the group's local_rows · width each, rank order) = every rank's `mine`.
  template <comm::CommElement T>
  void all_gather(const T* mine, T* whole, int64_t elements_per_rank) {
    if (group_ == nullptr || !status_.ok()) return;
    status_ = group_->all_gather(mine, whole, static_cast<size_t>(elements_per_rank));
  }
  // mine = this rank's rows of the sum over the group of `whole`.
  template <comm::CommElement T>
  void reduce_scatter(const T* whole, T* mine, int64_t elements_per_rank) {
    if (group_ == nullptr || !status_.ok()) return;
    status_ = group_->reduce_scatter(whole, mine, static_cast<size_t>(elements_per_rank), comm::ReduceOp::sum);
  }

  // all_gather with `consume(chunk)` run on each chunk as it arrives (overlapped_all_gather).
  template <comm::CommElement T, typename Local, typename Consume>
  void all_gather_overlapped(const Local& local, const T* mine, T* whole, int64_t elements_per_rank, Consume consume) {
    if (!status_.ok()) return;
    status_ = overlapped_all_gather(*group_, local, mine, whole, elements_per_rank, consume);
  }
  // reduce_scatter of the partial chunks `produce` writes, each sent as it is made (overlapped_reduce_scatter).
  template <comm::CommElement T, typename Local, typename Produce>
  void reduce_scatter_overlapped(const Local& local, T* whole, T* sends, T* mine, int64_t elements_per_rank, Produce produce) {
    if (!status_.ok()) return;
    status_ = overlapped_reduce_scatter(*group_, local, whole, sends, mine, elements_per_rank, produce);
  }

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
  bool sequence_parallel_ = false;
  bool overlapped_ = false;
  Status status_ = Status::success();
};

}  // namespace tessera::engine
