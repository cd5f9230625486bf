// Softmax cross-entropy over V classes for N tokens, on fp32 logits, in place:
// forward turns `logits` into probabilities and writes each token's loss;
// backward turns the probabilities into dlogits = (p − onehot(target)) · scale,
// with scale = d(loss)/d(token loss), e.g. 1 / (tokens in the batch).
// Keeping one (N, V) buffer for logits, probabilities and their gradient is what
// the planner's `logits` category counts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tessera::engine::cpu {

template <typename T>
void cross_entropy_forward(T* losses, T* logits, const int32_t* targets, int64_t N, int64_t V) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* row = logits + n * V;
    const T max_logit = *std::max_element(row, row + V);
    T sum = 0;
    for (int64_t i = 0; i < V; ++i) {
      row[i] = std::exp(row[i] - max_logit);
      sum += row[i];
    }
    for (int64_t i = 0; i < V; ++i) row[i] /= sum;
    losses[n] = -std::log(row[targets[n]]);
  }
}

template <typename T>
void cross_entropy_backward(T* probs_to_dlogits, const int32_t* targets, int64_t N, int64_t V, T scale) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    T* row = probs_to_dlogits + n * V;
    for (int64_t i = 0; i < V; ++i) row[i] *= scale;
    row[targets[n]] -= scale;
  }
}

}  // namespace tessera::engine::cpu
