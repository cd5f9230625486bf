// The CPU backend's per-thread scratch, one ledger-booked buffer under
// `workspace`, sized by the planner's formula (planner/cpu_backend.h) so that
// the estimate and the ledger agree. Thread t owns slot t: attention's scratch
// (planner::AttentionScratch), then (in mixed precision) three fp32 GEMM tiles.
#pragma once

#include <omp.h>

#include <cstdint>

#include "tessera/engine/half.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/cpu_backend.h"
#include "tessera/planner/status.h"

namespace tessera::engine::cpu {

// Threads the CPU backend runs on (OpenMP's team size).
inline int64_t backend_threads() { return omp_get_max_threads(); }

// W: the compute type (float, or double for gradient checks).
template <typename W>
class Workspace {
 public:
  Workspace() = default;
  // Attention of sequences of seq_len tokens, head_dim values per head.
  Workspace(MemoryLedger& ledger, int64_t seq_len, int64_t head_dim, planner::Precision precision)
      : threads_(backend_threads()),
        per_thread_(planner::cpu_workspace_elements_per_thread(seq_len, head_dim, precision)),
        attention_(planner::AttentionScratch{seq_len, head_dim}),
        buffer_(ledger, MemoryCategory::workspace, threads_ * per_thread_) {}

  // The calling thread's attention scratch, laid out as attention_layout() says.
  W* attention_scratch() { return slot(); }
  const planner::AttentionScratch& attention_layout() const { return attention_; }
  // Three kGemmTile² fp32 tiles for the calling thread (mixed precision only).
  float* gemm_tiles() {
    static_assert(std::is_same_v<W, float>, "only 16-bit GEMMs use tiles, and they compute in fp32");
    return slot() + attention_.elements();
  }

 private:
  // A thread beyond those counted at creation (OMP_NUM_THREADS raised later,
  // or a nested team) would write past the buffer: stop instead.
  W* slot() {
    const int64_t thread = omp_get_thread_num();
    TESSERA_CHECK(thread < threads_, "CPU workspace used by more threads than it was sized for");
    return buffer_.data() + thread * per_thread_;
  }

  int64_t threads_ = 0;
  int64_t per_thread_ = 0;
  planner::AttentionScratch attention_;
  Tensor<W> buffer_;
};

}  // namespace tessera::engine::cpu
