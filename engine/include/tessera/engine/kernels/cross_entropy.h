// Fused softmax + cross-entropy + gradient (the GPU twin of
// ops/cross_entropy.h's forward then backward, with its per-element
// arithmetic from elementwise_math.h), in the manner of llm.c's
// fused_classifier: the (N, V) logits stay in their 16-bit storage type and
// their gradient overwrites them, so no fp32 copy of the logits ever exists.
//
// Parallel structure: one block per row (rows strided by gridDim); the block's
// threads stride over the row three times: its maximum (block_max), its sum of
// e^(x − max) (block_sum), then each thread turns its columns into
// probabilities and, where asked, gradients (p − onehot(target)) · dloss_scale.
// The thread that holds the target column writes the row's loss from the
// logit it read, before overwriting it: no other thread reads that column
// after the sum's barrier. Columns [valid, V) are padding: probability 0,
// gradient 0. One rank's whole vocabulary: the tensor-parallel split of
// ops/cross_entropy.h needs reductions across ranks between the passes.
#pragma once

#include <cmath>
#include <cstdint>

#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/block_reduce.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels {

// 512 threads: a 50304-wide row is ~98 columns per thread per pass.
inline constexpr unsigned kCrossEntropyBlock = 512;

inline LaunchShape cross_entropy_shape(int64_t N) {
  return {blocks_for(N, 1), kCrossEntropyBlock, kCrossEntropyBlock / kWarpSize * sizeof(double)};
}

// losses (N) = −log p(target); logits (N, V) become dlogits when
// `write_gradient`; targets (N) in [0, valid).
template <typename Ctx, typename T>
TESSERA_KERNEL_BODY void fused_cross_entropy_body(Ctx& ctx, compute_t<T>* losses, T* logits, const int32_t* targets, int64_t N, int64_t V,
                                                  int64_t valid, compute_t<T> dloss_scale, bool write_gradient) {
  using W = compute_t<T>;
  W* scratch = ctx.template shared<W>();
  if (valid > V) valid = V;
  for (int64_t n = ctx.block_idx(); n < N; n += ctx.grid_dim()) {
    T* row = logits + n * V;
    W local_max = -INFINITY;
    for (int64_t i = ctx.thread_idx(); i < valid; i += ctx.block_dim()) local_max = MaxOp{}(local_max, widen(row[i]));
    const W max = block_max(ctx, local_max, scratch);
    W local_sum = 0;
    for (int64_t i = ctx.thread_idx(); i < valid; i += ctx.block_dim()) local_sum += math::softmax_numerator(widen(row[i]), max);
    const W sum = block_sum(ctx, local_sum, scratch);
    const int64_t target = targets[n];
    for (int64_t i = ctx.thread_idx(); i < V; i += ctx.block_dim()) {
      const W p = i < valid ? math::softmax_numerator(widen(row[i]), max) / sum : W(0);
      if (i == target) losses[n] = math::cross_entropy_loss(p);
      if (write_gradient) row[i] = narrow<T>(math::cross_entropy_dlogit(p, i == target, dloss_scale));
    }
  }
}

}  // namespace tessera::engine::kernels
