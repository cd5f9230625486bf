// Softmax cross-entropy over the vocabulary for N tokens, on fp32 logits, in
// place: forward turns `logits` into probabilities and writes each token's
// loss; backward turns the probabilities into dlogits = (p − onehot(target)) ·
// scale, with scale = d(loss)/d(token loss), e.g. 1 / (tokens in the batch).
// Keeping one (N, V) buffer for logits, probabilities and their gradient is what
// the planner's `logits` category counts.
//
// The vocabulary may be split over tensor-parallel ranks (model/tensor_parallel.h):
// a VocabSlice says which classes this rank's V columns are, and `reduce`
// combines one value per row over the ranks (the row's maximum, its sum of
// exponentials, its target's -log p), so the logits are never gathered
// (Megatron-LM's vocab_parallel_cross_entropy). On one rank `reduce` does nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "tessera/engine/comm/comm_types.h"
#include "tessera/engine/elementwise_math.h"
#include "tessera/engine/ops/vocab_slice.h"

namespace tessera::engine::cpu {

// No other ranks: every row's values are already whole.
struct WholeVocabulary {
  template <typename T>
  void operator()(T*, int64_t, comm::ReduceOp) const {}
};

// Each row holds V columns: the slice's valid classes, then padding (probability 0).
template <typename T, typename Reduce = WholeVocabulary>
void cross_entropy_forward(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V, VocabSlice slice, Reduce&& reduce = {}) {
  slice.valid = std::min(slice.valid, V);
  // The row's maximum, over all ranks (losses holds it for now).
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    const T* row = logits + n * V;
    losses[n] = slice.valid > 0 ? *std::max_element(row, row + slice.valid) : -INFINITY;
  }
  reduce(losses, N, comm::ReduceOp::max);
  // Exponentials and their sum, over all ranks.
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * V;
    const T max_logit = losses[n];
    T sum = 0;
    for (int64_t i = 0; i < slice.valid; ++i) {
      row[i] = math::softmax_numerator(row[i], max_logit);
      sum += row[i];
    }
    std::fill(row + slice.valid, row + V, T(0));
    losses[n] = sum;
  }
  reduce(losses, N, comm::ReduceOp::sum);
  // Probabilities, and -log p of the target from the rank that holds it.
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * V;
    const T sum = losses[n];
    for (int64_t i = 0; i < slice.valid; ++i) row[i] /= sum;
    losses[n] = slice.owns(targets[n]) ? math::cross_entropy_loss(row[targets[n] - slice.first_class]) : T(0);
  }
  reduce(losses, N, comm::ReduceOp::sum);
}

// One rank's whole vocabulary of V classes.
template <typename T>
void cross_entropy_forward(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V) {
  cross_entropy_forward(losses, logits, targets, N, V, VocabSlice{});
}

template <typename T>
void cross_entropy_backward(T* probs_to_dlogits, const int32_t* targets, int64_t N, int64_t V, T scale, VocabSlice slice) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* row = probs_to_dlogits + n * V;
    const int64_t target = slice.owns(targets[n]) ? targets[n] - slice.first_class : -1;
    for (int64_t i = 0; i < V; ++i) row[i] = math::cross_entropy_dlogit(row[i], i == target, scale);
  }
}

template <typename T>
void cross_entropy_backward(T* probs_to_dlogits, const int32_t* targets, int64_t N, int64_t V, T scale) {
  cross_entropy_backward(probs_to_dlogits, targets, N, V, scale, VocabSlice{});
}

}  // namespace tessera::engine::cpu
