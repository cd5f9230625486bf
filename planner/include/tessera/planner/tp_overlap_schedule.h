// --tp-comm-overlap's chunk schedule: sequence parallelism's all-gathers and
// reduce-scatters split into one chunk per tensor-parallel rank (a rank's N/tp
// rows, rank order) and moved by point-to-point transfers while the GEMM beside
// them computes on the chunk in hand. The CPU engine (model/sequence_overlap.h),
// the GPU step and the planner's traffic and memory terms all read this table.
//
// It is PyTorch's async tensor parallelism (what torchtitan enables), in
// pytorch/pytorch@006b161f torch/distributed/_symmetric_memory/__init__.py:
//  - all-gather → GEMM (_pipelined_multi_all_gather_and_consume, behind
//    _fused_all_gather_matmul): the GEMM runs on this rank's own chunk first,
//    then at step s = 1..tp-1 on rank (r+s)'s, which has arrived meanwhile;
//    the chunks land in the gathered buffer itself, so nothing extra is held.
//  - GEMM → reduce-scatter (_pipelined_produce_and_all2all, behind
//    _fused_matmul_reduce_scatter): at step s = 1..tp-1 the GEMM writes the
//    partial rows of rank (r+s) into one of two buffers and sends them there,
//    while rank (r-s)'s partial rows for this rank arrive; this rank's own
//    rows come last; the tp partials are then summed locally ("two local p2p
//    buffers, so that a remote rank can pull the result of step [i] in one
//    p2p buffer while the local rank can compute the result of step [i+1]").
//    We sum them in rank order (comm/ordered_reduce.h), so the result is the
//    plain reduce-scatter's bit for bit.
// Each chunk crosses the ring once from the rank that owns (all-gather) or
// produced (reduce-scatter) it: tp - 1 sends and recvs of N/tp rows per call,
// the (tp-1)/tp of the payload a ring collective moves.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::planner {

struct TpOverlapStep {
  int64_t chunk = 0;   // the chunk the GEMM computes on (all-gather) or produces (reduce-scatter)
  int64_t send_to = -1;    // the rank this step's chunk goes to (-1: none)
  int64_t recv_from = -1;  // the rank whose chunk arrives during this step (-1: none)
};

// tp steps of rank `rank` in a group of `tp` (> 1), in the order they run.
// All-gather: step s computes on chunk (rank + s) mod tp, received from that
// rank; this rank's own chunk goes to rank (rank - s) mod tp, which computes on
// it at its step s. Step 0 is the own chunk, with no transfer.
std::vector<TpOverlapStep> tp_overlap_all_gather_steps(int64_t tp, int64_t rank);
// Reduce-scatter: step s < tp - 1 produces the rows of rank (rank + s + 1) mod
// tp and sends them there, and receives rank (rank - s - 1) mod tp's partial of
// this rank's rows; the last step produces this rank's own rows.
std::vector<TpOverlapStep> tp_overlap_reduce_scatter_steps(int64_t tp, int64_t rank);

// Outgoing chunks the reduce-scatter holds at once: two (step s+1's GEMM writes
// one while step s's is still on its way, as PyTorch's two p2p buffers), one
// where there is a single send (tp = 2).
int64_t tp_overlap_send_buffers(int64_t tp);

}  // namespace tessera::planner
