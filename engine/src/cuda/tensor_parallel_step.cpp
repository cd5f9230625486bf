// The GPU step's tensor-parallel calls; see tensor_parallel_step.h.
#include "tensor_parallel_step.h"

#include <stdexcept>
#include <string>

#include "tessera/engine/cuda/cross_entropy.h"
#include "tessera/engine/cuda/ordered_reduce.h"
#include "tessera/engine/cuda/vocab_parallel_cross_entropy.h"
#include "tessera/engine/device/tensor_parallel_part.h"

#include "cuda_errors.h"
#include "global_sum_of_squares.h"

namespace tessera::engine::cuda {

void DeviceChunks::copy(bf16* to, const bf16* from, int64_t n) const {
  made(cudaMemcpyAsync(to, from, static_cast<size_t>(n) * sizeof(bf16), cudaMemcpyDeviceToDevice, nullptr), "the own sequence chunk's copy");
}

void DeviceChunks::sum_in_rank_order(bf16* out, const bf16* slices, int64_t tp, int64_t n) const {
  made(ordered_reduce(out, slices, static_cast<int>(tp), n, false, nullptr), "the rank-order sum of the partial sequence chunks");
}

TensorParallelStep::TensorParallelStep(comm::Communicator* group, const planner::Model& part, bool sequence_parallel, TpCommunication communication)
    : split_(group, sequence_parallel, communication), group_(split_.size() > 1 ? group : nullptr), vocab_size_(part.config.vocab_size),
      counted_(gradient_norm_runs(part, split_.rank())) {}

void TensorParallelStep::sum(bf16* x, int64_t n) {
  split_.all_reduce(x, n);
  if (!split_.status()) throw std::runtime_error("tensor-parallel all-reduce: " + split_.status().error().message);
}

const bf16* TensorParallelStep::whole_rows(const bf16* rows, bf16* buffer, int64_t N, int64_t C) {
  if (!sequence_parallel()) return rows;
  split_.all_gather(rows, buffer, local_rows(N) * C);
  if (!split_.status()) throw std::runtime_error("sequence-parallel all-gather: " + split_.status().error().message);
  return buffer;
}

void TensorParallelStep::reduce_rows(bf16* whole, bf16* mine, int64_t N, int64_t C) {
  if (!sequence_parallel()) return sum(mine, N * C);
  split_.reduce_scatter(whole, mine, local_rows(N) * C);
  if (!split_.status()) throw std::runtime_error("sequence-parallel reduce-scatter: " + split_.status().error().message);
}

void TensorParallelStep::cross_entropy(float* losses, bf16* logits, const int32_t* targets, int64_t N, int64_t V, float dloss_scale,
                                       float* row_statistics) {
  const cpu::VocabSlice slice = vocab();
  if (size() == 1) return made(fused_cross_entropy(losses, logits, targets, N, V, slice.valid, dloss_scale, true, nullptr), "cross-entropy");
  float* row_max = row_statistics;
  float* row_sum = row_statistics + N;
  // Megatron-LM's vocab_parallel_cross_entropy: each pass's N values reduced over the group before the next.
  made(vocab_row_max(row_max, logits, N, V, slice.valid, nullptr), "cross-entropy row maximum");
  split_.all_reduce(row_max, N, comm::ReduceOp::max);
  made(vocab_row_sum_exp(row_sum, logits, row_max, N, V, slice.valid, nullptr), "cross-entropy row sum");
  split_.all_reduce(row_sum, N);
  made(vocab_parallel_loss(losses, logits, targets, row_max, row_sum, N, V, slice, dloss_scale, true, nullptr), "cross-entropy loss");
  split_.all_reduce(losses, N);
  if (!split_.status()) throw std::runtime_error("vocabulary-parallel cross-entropy: " + split_.status().error().message);
}

double TensorParallelStep::sum_of_squares(const bf16* grads, double* result, void* workspace) {
  auto sum = global_sum_of_squares(grads, counted_, result, workspace, {group_});
  if (!sum) throw std::runtime_error("gradient norm: " + sum.error().message);
  return sum.value();
}

}  // namespace tessera::engine::cuda
