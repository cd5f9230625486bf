// The planner request a CPU training run corresponds to: the options as
// given, on ranks with no GPU runtime (no CUDA context, allocator reserve or
// NCCL buffers), DDP's buckets as views of the gradients (the engine's only
// way), and the CPU backend's workspace (planner/cpu_backend.h), whose
// attention scratch holds a rank's own tokens: its share of each sequence
// under context parallelism. What `tessera train` estimates and the tests
// hold the ledger to.
#pragma once

#include "tessera/engine/ops/workspace.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/training_config.h"

namespace tessera::engine {

inline planner::EstimateRequest cpu_run_request(planner::EstimateRequest r, const planner::ModelConfig& config) {
  r.plugin.gradient_as_bucket_view = true;
  r.assumptions.cuda_context_bytes = 0;
  r.assumptions.allocator_reserve_fraction = 0;
  r.assumptions.cublas_workspace_bytes = planner::cpu_workspace_bytes(cpu::backend_threads(), r.local_seq_len(), config.head_dim, r.training.precision);
  r.assumptions.nccl_bytes_per_group = 0;
  return r;
}

}  // namespace tessera::engine
