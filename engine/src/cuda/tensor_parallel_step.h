// Megatron-LM's tensor parallelism in the GPU step (cuda/gpt_training.h), as
// the CPU model runs it (model/tensor_parallel.h, model/transformer.cpp): the
// rank holds its part of every split layer by the planner's rule
// (planner/tensor_parallel.h: tp_rank_model), so it computes with a tp rank's
// widths (device/tensor_parallel_part.h: heads, key-value heads and MLP over
// tp, ⌈V/tp⌉ vocabulary rows); the partial (N, C) sums of the row-parallel layers (the
// attention output, the MLP's down projection, the vocabulary-parallel
// embedding) and of the column-parallel layers' input gradients (before each
// norm's backward, the head's included) are all-reduced over the group, in
// place, on device buffers (NCCL's communicator, comm/nccl.h: rank-order
// sums, the same bits on every rank, after the compute stream's queued work);
// a row-parallel bias is added by rank 0 alone; the loss is the
// vocabulary-parallel fused cross-entropy (cuda/vocab_parallel_cross_entropy.h)
// with its three all-reduces of N fp32 values; the gradient norm counts each
// parameter once over the group (gradient_norm_runs). On one rank every call
// is what the one-GPU step did.
//
// Sequence parallelism (Korthikanti et al. 2022 §4.2.2), as the CPU model's
// (model/tensor_parallel.h): outside the split layers the rank keeps rows
// [r · N/tp, (r+1) · N/tp) of every (N, C) tensor (local_rows, first_row);
// whole_rows all-gathers a norm's output (or a gradient) before a column-
// parallel layer reads it, and reduce_rows reduce-scatters a row-parallel
// layer's partial sum into the rank's rows where it would all-reduce it.
//
// --tp-comm-overlap (TpCommunication::overlapped): the CPU model's code
// (model/sequence_overlap.h) runs the gathers before the column-parallel
// GEMMs and the reduce-scatters after the GEMMs that make partial sums as
// planner/tp_overlap_schedule.h's chunks, each a grouped ncclSend/ncclRecv on
// the NCCL communicator's stream (after the compute stream's queued work) while
// the compute stream runs the GEMM on the chunk before; the host waits for a
// chunk's event before queueing the GEMM that reads it. DeviceChunks is the
// local half on the compute stream: the own chunk's copy and the rank-order
// sum of the partial chunks (the NCCL backend's own reduction kernel).
//
// Errors: a failed launch or collective is thrown as the step's one line
// (gpt_training.cpp catches it).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/half.h"
#include "tessera/engine/model/tensor_parallel.h"
#include "tessera/engine/ops/vocab_slice.h"
#include "tessera/planner/model.h"

namespace tessera::engine::cuda {

// sequence_overlap.h's local half on the device, queued on the compute stream.
struct DeviceChunks {
  void copy(bf16* to, const bf16* from, int64_t n) const;
  void sum_in_rank_order(bf16* out, const bf16* slices, int64_t tp, int64_t n) const;
};

class TensorParallelStep {
 public:
  TensorParallelStep() = default;  // none yet: GptTraining::create assigns it
  // `group`: the tensor-parallel ranks' communicator on device buffers (null or one rank: none).
  // `part`: the rank's part of the model (tp_rank_model), its config the whole one's.
  TensorParallelStep(comm::Communicator* group, const planner::Model& part, bool sequence_parallel, TpCommunication communication);

  int64_t size() const { return split_.size(); }
  comm::Communicator* group() const { return group_; }  // null on one rank
  int64_t rank() const { return split_.rank(); }
  // This rank's vocabulary classes (its embedding rows and logit columns).
  cpu::VocabSlice vocab() const { return {split_.vocab_begin(vocab_size_), split_.vocab_valid(vocab_size_)}; }

  bool sequence_parallel() const { return split_.sequence_parallel(); }
  bool overlapped() const { return split_.overlapped(); }
  // The rows of an (N, C) tensor outside the split layers that this rank keeps, and the first of them.
  int64_t local_rows(int64_t N) const { return split_.local_rows(N); }
  int64_t first_row(int64_t N) const { return split_.first_row(N); }
  // Under sequence parallelism every rank's rows of `rows` gathered into
  // `buffer` (N · C), which it returns; else `rows`, whole already.
  const bf16* whole_rows(const bf16* rows, bf16* buffer, int64_t N, int64_t C);
  // A split layer's partial (N, C) sum over the group: reduce-scattered from
  // `whole` into this rank's rows `mine` under sequence parallelism, else
  // summed in place (`whole` == `mine`).
  void reduce_rows(bf16* whole, bf16* mine, int64_t N, int64_t C);
  // whole_rows under --tp-comm-overlap: `consume(chunk)` queues the GEMMs on
  // each rank's rows of `buffer` once they are there (overlapped_all_gather).
  template <typename Consume>
  void all_gather_overlapped(const bf16* rows, bf16* buffer, int64_t N, int64_t C, Consume consume) {
    split_.all_gather_overlapped(DeviceChunks{}, rows, buffer, local_rows(N) * C, consume);
    if (!split_.status()) throw std::runtime_error("sequence-parallel all-gather (overlapped): " + split_.status().error().message);
  }
  // reduce_rows under --tp-comm-overlap: `produce(chunk, into)` queues the
  // GEMMs that write this rank's partial of each rank's rows, each sent as
  // soon as it is made from `sends` (overlapped_reduce_scatter).
  template <typename Produce>
  void reduce_scatter_overlapped(bf16* whole, bf16* sends, bf16* mine, int64_t N, int64_t C, Produce produce) {
    split_.reduce_scatter_overlapped(DeviceChunks{}, whole, sends, mine, local_rows(N) * C, produce);
    if (!split_.status()) throw std::runtime_error("sequence-parallel reduce-scatter (overlapped): " + split_.status().error().message);
  }

  // x (n elements on the device) = its sum over the group, in place: Megatron's g after a
  // row-parallel layer's forward, f before a column-parallel layer's input gradient goes on.
  void sum(bf16* x, int64_t n);
  // A row-parallel layer's bias, whole on every rank, enters the sum once: rank 0's.
  const bf16* row_parallel_bias(const bf16* bias) const { return rank() == 0 ? bias : nullptr; }

  // losses (N, fp32) = −log p(target) of the whole vocabulary; the (N, V)
  // logits of this rank's V columns become dlogits = (p − onehot) ·
  // dloss_scale. `row_statistics`: 2N fp32 of device scratch (unused on one rank).
  void cross_entropy(float* losses, bf16* logits, const int32_t* targets, int64_t N, int64_t V, float dloss_scale, float* row_statistics);

  // The square of the global gradient norm: the sum of squares of the
  // counted ranges of `grads` (its flat order), summed over the group.
  // `result`: a device double (and its overflow flag after it), `workspace`
  // sum_of_squares_workspace_bytes of the whole buffer.
  double sum_of_squares(const bf16* grads, double* result, void* workspace);

 private:
  TensorParallel split_;
  comm::Communicator* group_ = nullptr;  // the group's communicator (null on one rank), for the norm (global_sum_of_squares.h)
  int64_t vocab_size_ = 0;
  std::vector<std::pair<int64_t, int64_t>> counted_;  // [begin, end) runs of the flat gradients the norm counts
};

}  // namespace tessera::engine::cuda
