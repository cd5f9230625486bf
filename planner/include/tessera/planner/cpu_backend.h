// What the engine's CPU backend allocates besides the model's tensors, so that
// the planner's estimate for a run on the CPU (`tessera train` writes it as
// plan.json) counts the same `workspace` bytes as the engine's ledger. One
// source: the engine sizes its workspace with these functions.
//
// Per thread, the CPU backend keeps
//  - rows of the attention gradient dP = dO·Vᵀ, kAttentionRows × seq_len
//    compute-precision values (the backward forms dP a block of rows at a time);
//  - in mixed precision, three fp32 tiles of kGemmTile × kGemmTile: 16-bit
//    GEMM operands are widened tile by tile for cblas_sgemm (OpenBLAS has no
//    bf16/fp16 GEMM we can rely on), and the output tile accumulates in fp32.
#pragma once

#include <cstdint>

#include "tessera/planner/hardware.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

inline constexpr int64_t kAttentionRows = 64;
inline constexpr int64_t kGemmTile = 128;

constexpr int64_t cpu_workspace_elements_per_thread(int64_t seq_len, Precision precision) {
  const int64_t tiles = is_mixed_precision(precision) ? 3 * kGemmTile * kGemmTile : 0;
  return kAttentionRows * seq_len + tiles;
}

// Compute precision is fp32 for fp32 and mixed-precision training alike.
constexpr int64_t cpu_workspace_bytes(int64_t threads, int64_t seq_len, Precision precision) {
  return threads * cpu_workspace_elements_per_thread(seq_len, precision) * 4;
}

// The CPU the engine runs on, as a "GPU" profile for the planner (`tessera
// train --gpu cpu`, and a measured CPU run in the GUI): named "cpu", its memory
// is this machine's RAM, and nothing is lost to a CUDA context. Its peak (0.1
// TFLOP/s in every precision) and bandwidths are placeholders of a few-core
// machine: step times predicted on it are an order of magnitude, not a measurement.
GpuProfile host_cpu_profile();

}  // namespace tessera::planner
