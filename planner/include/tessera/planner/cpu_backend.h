// What the engine's CPU backend allocates besides the model's tensors, so that
// the planner's estimate for a run on the CPU (`tessera train` writes it as
// plan.json) counts the same `workspace` bytes as the engine's ledger. One
// source: the engine sizes and carves its workspace with these definitions.
//
// Per thread, the CPU backend keeps
//  - attention's scratch (AttentionScratch below): FlashAttention-2's blocks
//    of one (sample, head) at a time, and one head's fp32 dQ accumulator;
//  - in mixed precision, three fp32 tiles of kGemmTile × kGemmTile: 16-bit
//    GEMM operands are widened tile by tile for cblas_sgemm (OpenBLAS has no
//    bf16/fp16 GEMM we can rely on), and the output tile accumulates in fp32.
#pragma once

#include <cstdint>

#include "tessera/planner/hardware.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Query rows and key columns of one attention block (Dao 2023's B_r = B_c). A
// block's scores, its widened Q, K, V and dO rows and its accumulators (at most
// 7 · 64 · 128 + 2 · 64² values at head size 128, 256 KiB in fp32) stay in one
// core's L2. Measured with bench/attention_bench.cpp on one thread: 32 takes
// 15% more CPU time than 64 at sequences 1024 and 2048 (the same at 256), 128
// takes 10-15% more at 256 (the same at 1024 and 2048).
inline constexpr int64_t kAttentionBlock = 64;
inline constexpr int64_t kGemmTile = 128;

// One thread's attention scratch, in compute-precision elements, carved in this
// order from the start of its workspace slot. Forward uses the blocks, the
// output accumulator and the row statistics; backward the blocks, the
// gradient accumulators and the per-head rows.
struct AttentionScratch {
  int64_t seq_len = 0, head_dim = 0;

  constexpr int64_t block() const { return kAttentionBlock * head_dim; }             // kAttentionBlock rows of one head
  constexpr int64_t q() const { return 0; }                                          // query rows, widened
  constexpr int64_t k() const { return q() + block(); }                              // key rows, widened
  constexpr int64_t v() const { return k() + block(); }                              // value rows, widened
  constexpr int64_t dout() const { return v() + block(); }                           // output-gradient rows, widened
  constexpr int64_t out() const { return dout() + block(); }                         // forward: unnormalised output rows
  constexpr int64_t dk() const { return out() + block(); }                           // backward: dK of one key block
  constexpr int64_t dv() const { return dk() + block(); }                            // backward: dV of one key block
  constexpr int64_t scores() const { return dv() + block(); }                        // S, then P: kAttentionBlock²
  constexpr int64_t dscores() const { return scores() + kAttentionBlock * kAttentionBlock; }  // backward: dP, then dS
  constexpr int64_t row_max() const { return dscores() + kAttentionBlock * kAttentionBlock; }  // forward: running max m
  constexpr int64_t row_sum() const { return row_max() + kAttentionBlock; }          // forward: running sum ℓ
  constexpr int64_t dq() const { return row_sum() + kAttentionBlock; }               // backward: one head's dQ, seq_len × head_dim
  constexpr int64_t delta() const { return dq() + seq_len * head_dim; }              // backward: D = rowsum(dO ∘ O), seq_len
  constexpr int64_t elements() const { return delta() + seq_len; }
};

constexpr int64_t cpu_workspace_elements_per_thread(int64_t seq_len, int64_t head_dim, Precision precision) {
  const int64_t tiles = is_mixed_precision(precision) ? 3 * kGemmTile * kGemmTile : 0;
  return AttentionScratch{seq_len, head_dim}.elements() + tiles;
}

// Compute precision is fp32 for fp32 and mixed-precision training alike.
constexpr int64_t cpu_workspace_bytes(int64_t threads, int64_t seq_len, int64_t head_dim, Precision precision) {
  return threads * cpu_workspace_elements_per_thread(seq_len, head_dim, precision) * 4;
}

// The CPU the engine runs on, as a "GPU" profile for the planner (`tessera
// train --gpu cpu`, and a measured CPU run in the GUI): named "cpu", its memory
// is this machine's RAM, and nothing is lost to a CUDA context. Its peak (0.1
// TFLOP/s in every precision) and bandwidths are placeholders of a few-core
// machine: step times predicted on it are an order of magnitude, not a measurement.
GpuProfile host_cpu_profile();

}  // namespace tessera::planner
