// The fused softmax + cross-entropy + gradient over a tensor-parallel rank's
// share of the vocabulary (the GPU twin of ops/cross_entropy.h's
// vocabulary-parallel path, Megatron-LM's vocab_parallel_cross_entropy): the
// (N, V) logits of this rank's classes stay in their 16-bit storage type and
// their gradient overwrites them, no fp32 copy of them ever exists, and they
// are never gathered. Three passes over the rows, with one value per row
// reduced over the tensor-parallel group between them (the caller's
// all-reduces of N floats):
//   1. vocab_row_max_body: each row's maximum over this rank's valid columns
//      (−inf where it holds none)                      → all-reduce max;
//   2. vocab_row_sum_exp_body: each row's sum of e^(x − max) → all-reduce sum;
//   3. vocab_parallel_loss_body: p = e^(x − max) / sum; the rank that holds the
//      target writes −log p(target), the others 0      → all-reduce sum; and,
//      where asked, the logits become (p − onehot(target)) · dloss_scale.
// The per-element arithmetic is elementwise_math.h's, as the CPU op's and the
// one-rank kernel's (kernels/cross_entropy.h).
//
// Parallel structure: one block per row (rows strided by gridDim), its threads
// striding over the row's columns, partial maxima and sums combined by
// block_reduce.h (deterministic). In pass 3 exactly one thread writes a row's
// loss: the one whose columns hold the target, or thread 0 where no column
// does (no barrier is needed). Columns [valid, V) are padding: probability 0,
// gradient 0.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/block_reduce.h"
#include "tessera/engine/kernels/cross_entropy.h"
#include "tessera/engine/kernels/thread_context.h"
#include "tessera/engine/ops/vocab_slice.h"

namespace tessera::engine::kernels {

// The one-rank kernel's launch: a block of 512 threads per row.
inline LaunchShape vocab_parallel_cross_entropy_shape(int64_t N) { return cross_entropy_shape(N); }

// row_max (N) = the maximum of each row's columns [0, valid).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void vocab_row_max_body(Ctx& ctx, compute_t<T>* row_max, const T* logits, int64_t N, int64_t V, int64_t valid) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  if (valid > V) valid = V;
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* row = logits + n * V;
    W local = -INFINITY;
    for (int64_t i = ctx.thread_idx(); i < valid; i += ctx.block_dim()) local = MaxOp{}(local, widen(row[i]));
    const W max = block_max(ctx, local, scratch);
    if (ctx.thread_idx() == 0) row_max[n] = max;
  }
}

// row_sum (N) = Σ e^(x − row_max) over each row's columns [0, valid).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void vocab_row_sum_exp_body(Ctx& ctx, compute_t<T>* row_sum, const T* logits, const compute_t<T>* row_max, int64_t N, int64_t V,
                                                int64_t valid) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  if (valid > V) valid = V;
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    const T* row = logits + n * V;
    const W max = row_max[n];
    W local = 0;
    for (int64_t i = ctx.thread_idx(); i < valid; i += ctx.block_dim()) local += math::softmax_numerator(widen(row[i]), max);
    const W sum = block_sum(ctx, local, scratch);
    if (ctx.thread_idx() == 0) row_sum[n] = sum;
  }
}

// losses (N) = −log p(target) where this rank's slice holds the target, else
// 0; logits (N, V) become dlogits when `write_gradient`. row_max and row_sum:
// the group's (after passes 1 and 2 and their all-reduces).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void vocab_parallel_loss_body(Ctx& ctx, compute_t<T>* losses, T* logits, const int32_t* targets, const compute_t<T>* row_max,
                                                  const compute_t<T>* row_sum, int64_t N, int64_t V, cpu::VocabSlice slice, compute_t<T> dloss_scale,
                                                  bool write_gradient) {
  using W = compute_t<T>;
  const int64_t valid = slice.valid < V ? slice.valid : V;
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    T* row = logits + n * V;
    const W max = row_max[n], sum = row_sum[n];
    const int32_t target = targets[n];
    const int64_t local_target = target >= slice.first_class && target - slice.first_class < valid ? target - slice.first_class : -1;
    if (local_target < 0 && ctx.thread_idx() == 0) losses[n] = W(0);
    for (int64_t i = ctx.thread_idx(); i < V; i += ctx.block_dim()) {
      const W p = i < valid ? math::softmax_numerator(widen(row[i]), max) / sum : W(0);
      if (i == local_target) losses[n] = math::cross_entropy_loss(p);
      if (write_gradient) row[i] = narrow<T>(math::cross_entropy_dlogit(p, i == local_target, dloss_scale));
    }
  }
}

}  // namespace tessera::engine::kernels
