#include "tessera/planner/pp_traffic.h"

namespace tessera::planner {

int64_t stage_boundary_bytes(int64_t micro_batch, int64_t seq_len, int64_t hidden_size, Precision precision, const ParallelLayout& layout) {
  return micro_batch * seq_len * hidden_size * compute_bytes(precision) / (layout.sequence_parallel ? layout.tp : 1);
}

CollectiveCalls stage_sends_per_step(int64_t pp, int64_t stage, int64_t chunks, int64_t micro_batches, int64_t boundary_bytes) {
  int64_t sends_per_micro_batch = 0;
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t virtual_stage = chunk * pp + stage;
    if (virtual_stage < pp * chunks - 1) ++sends_per_micro_batch;  // the activation forward
    if (virtual_stage > 0) ++sends_per_micro_batch;               // the gradient back
  }
  const int64_t calls = pp > 1 ? sends_per_micro_batch * micro_batches : 0;
  return CollectiveCalls{calls, calls * boundary_bytes};
}

}  // namespace tessera::planner
