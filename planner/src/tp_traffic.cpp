#include "tessera/planner/tp_traffic.h"

namespace tessera::planner {
namespace {

void add(CollectiveCalls& to, int64_t calls, int64_t bytes_each) {
  to.calls += calls;
  to.bytes += calls * bytes_each;
}

}  // namespace

TpMicroBatchTraffic tp_micro_batch_traffic(const ModelConfig& config, TpStage stage, int64_t micro_batch, int64_t seq_len, bool sequence_parallel,
                                           RecomputeMode recompute, int64_t activation_bytes, TpCommOverlap overlap) {
  const int64_t rows = micro_batch * seq_len, layers = stage.layers;
  const int64_t activations = rows * config.hidden_size * activation_bytes;
  const int64_t embedding = stage.first ? 1 : 0, head = stage.last ? 1 : 0;
  // Each block recomputed whole calls its forward's two again.
  const int64_t recomputed = recompute == RecomputeMode::full ? 2 * stage.recomputed_whole.value_or(layers) : 0;
  TpMicroBatchTraffic t;
  if (sequence_parallel && overlap.enabled) {
    // Each block's 2 gathers and 2 reduce-scatters beside its GEMMs, forward, backward and recomputed.
    const auto chunks = [&](TpCalls& calls, int64_t overlapped) {
      add(calls.send, overlapped * (overlap.tp - 1), activations / overlap.tp);
      add(calls.recv, overlapped * (overlap.tp - 1), activations / overlap.tp);
    };
    add(t.forward.reduce_scatter, embedding, activations);
    add(t.forward.all_gather, head, activations);
    chunks(t.forward, 4 * layers);
    add(t.backward.reduce_scatter, head, activations);
    add(t.backward.all_gather, head + 2 * layers + embedding, activations);
    chunks(t.backward, 4 * layers + 2 * recomputed);
  } else if (sequence_parallel) {
    add(t.forward.reduce_scatter, embedding + 2 * layers, activations);
    add(t.forward.all_gather, 2 * layers + head, activations);
    add(t.backward.reduce_scatter, head + 2 * layers + recomputed, activations);
    add(t.backward.all_gather, head + 4 * layers + embedding + recomputed, activations);
  } else {
    add(t.forward.all_reduce, embedding + 2 * layers, activations);
    add(t.backward.all_reduce, head + 2 * layers + recomputed, activations);
  }
  if (stage.last) add(t.forward.all_reduce, 3, rows * 4);  // the cross-entropy's row maxima, sums and target logits
  return t;
}

CollectiveCalls tp_step_all_reduces(const ModelConfig& config, bool sequence_parallel, int64_t gradient_bytes) {
  CollectiveCalls calls;
  add(calls, 1, 8);  // the gradient norm
  if (sequence_parallel) {
    // Two norms per block and the final one; LayerNorm has a bias beside its weight.
    const int64_t tensors_per_norm = config.norm == NormKind::layer_norm ? 2 : 1;
    add(calls, (2 * config.num_layers + 1) * tensors_per_norm, config.hidden_size * gradient_bytes);
  }
  return calls;
}

}  // namespace tessera::planner
