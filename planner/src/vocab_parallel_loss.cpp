#include "tessera/planner/vocab_parallel_loss.h"

namespace tessera::planner {

ElementwiseBytes vocab_parallel_cross_entropy_bytes(int64_t vocab_per_rank, int64_t logits_bytes, bool fused) {
  constexpr double f = 4;  // the loss computes in fp32
  const auto d = static_cast<double>(logits_bytes);
  const auto v = static_cast<double>(vocab_per_rank);
  const double upcast = d == f ? 0 : f;  // the fp32 copy written; fp32 logits are used as they are
  if (fused) {
    // Forward: logits_max (read, the copy written), predicted_logits (read, write), the division (read, write).
    // Backward: the softmax read, written back, the bf16 gradient written.
    return {v * (d + upcast + 2 * f + 2 * f), v * (f + f + 2)};
  }
  // Forward: the cast, max, the subtraction, exp, the sums, the division.
  // Backward: mul_, the cast of the gradient back.
  const double cast = cast_bytes(d, f);
  return {v * (cast + f + 2 * f + 2 * f + f + 2 * f), v * (2 * f + cast)};
}

ElementwiseBytes vocab_parallel_cross_entropy_bytes(const ModelConfig& config, int64_t tp, int64_t logits_bytes, bool fused) {
  return vocab_parallel_cross_entropy_bytes((config.vocab_size + tp - 1) / tp, logits_bytes, fused);
}

bool runs_vocab_parallel_cross_entropy(const ModelConfig& config, Runtime runtime, const TrainingOptions& training) {
  if (training.torch_compile) return false;
  const ElementwiseExecution execution = elementwise_execution(config, runtime, training);
  return execution == ElementwiseExecution::megatron_lm_kernels || (execution == ElementwiseExecution::fused && runtime == Runtime::megatron);
}

}  // namespace tessera::planner
