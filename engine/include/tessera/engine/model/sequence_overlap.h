// --tp-comm-overlap: sequence parallelism's all-gather and reduce-scatter as
// point-to-point chunks in the order of planner/tp_overlap_schedule.h, with the
// GEMM beside them computing on the chunk in hand while the next one moves.
// A chunk is one rank's rows, `chunk_elements` = N/tp · width; `whole` holds
// tp of them in rank order. Each step's send and recv go as one started
// send_recv (MPI_Isend and MPI_Irecv; NCCL's grouped ncclSend and ncclRecv on
// its own stream), so neither waits for the other.
//
// One code for both engines: `local` does what stays on this rank, where the
// data lives (HostChunks below for the CPU; the GPU step's DeviceChunks queue
// the same on its compute stream): copy(to, from, n) and
// sum_in_rank_order(out, slices, tp, n), out[k] = Σ_r slices[r · n + k] in rank order.
//
// Both give the plain collective's result bit for bit: the all-gather only
// moves rows, and the reduce-scatter sums the tp partial chunks in rank order
// as the communicators' own reductions do (comm/ordered_reduce.h).
//
// Errors: the first failed transfer is returned; the group is then unusable
// (comm/communicator.h) and the pass that called it fails.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/comm/ordered_reduce.h"
#include "tessera/planner/tp_overlap_schedule.h"

namespace tessera::engine {

// The CPU's local half: host memory.
struct HostChunks {
  template <comm::CommElement T>
  void copy(T* to, const T* from, int64_t n) const {
    std::copy(from, from + n, to);
  }
  template <comm::CommElement T>
  void sum_in_rank_order(T* out, const T* slices, int64_t tp, int64_t n) const {
    comm::reduce_in_rank_order(out, slices, static_cast<int>(tp), static_cast<size_t>(n), comm::data_type_of<T>(), comm::ReduceOp::sum);
  }
};

// whole = every rank's `mine` (as all_gather); `consume(chunk)` runs on each
// chunk of `whole` as soon as it is there, this rank's own first. Every
// step's transfer starts at once: each rank's own chunk is ready.
template <comm::CommElement T, typename Local, typename Consume>
Status overlapped_all_gather(comm::Communicator& group, const Local& local, const T* mine, T* whole, int64_t chunk_elements, Consume consume) {
  const auto n = static_cast<size_t>(chunk_elements);
  const std::vector<planner::TpOverlapStep> steps = planner::tp_overlap_all_gather_steps(group.size(), group.rank());
  local.copy(whole + static_cast<size_t>(group.rank()) * n, mine, chunk_elements);
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from < 0) continue;
    T* into = whole + static_cast<size_t>(step.chunk) * n;
    if (Status s = group.start_send_recv(mine, static_cast<int>(step.send_to), into, static_cast<int>(step.recv_from), n); !s) return s;
  }
  for (const planner::TpOverlapStep& step : steps) {
    if (Status s = group.finish_recv(whole + static_cast<size_t>(step.chunk) * n); !s) return s;
    consume(step.chunk);
  }
  return Status::success();
}

// mine = this rank's chunk of the sum over the group (as reduce_scatter), where
// `produce(chunk, into)` writes this rank's partial of chunk `chunk` into
// `into` (chunk_elements). Each partial goes out as soon as it is made, from
// one of `sends` (planner::tp_overlap_send_buffers chunks), while the other
// ranks' partials of this rank's chunk arrive into their slots of `whole`;
// this rank's own partial, made last, goes into its own slot.
template <comm::CommElement T, typename Local, typename Produce>
Status overlapped_reduce_scatter(comm::Communicator& group, const Local& local, T* whole, T* sends, T* mine, int64_t chunk_elements, Produce produce) {
  const auto n = static_cast<size_t>(chunk_elements);
  const int64_t tp = group.size(), buffers = planner::tp_overlap_send_buffers(tp);
  const std::vector<planner::TpOverlapStep> steps = planner::tp_overlap_reduce_scatter_steps(tp, group.rank());
  int64_t sent = 0;
  for (const planner::TpOverlapStep& step : steps) {
    if (step.send_to < 0) {
      produce(step.chunk, whole + static_cast<size_t>(step.chunk) * n);
      continue;
    }
    T* out = sends + static_cast<size_t>(sent++ % buffers) * n;
    if (Status s = group.finish_send(out); !s) return s;  // the step that last sent from this buffer
    produce(step.chunk, out);
    T* into = whole + static_cast<size_t>(step.recv_from) * n;
    if (Status s = group.start_send_recv(out, static_cast<int>(step.send_to), into, static_cast<int>(step.recv_from), n); !s) return s;
  }
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from < 0) continue;
    if (Status s = group.finish_recv(whole + static_cast<size_t>(step.recv_from) * n); !s) return s;
  }
  local.sum_in_rank_order(mine, whole, tp, chunk_elements);
  return Status::success();
}

}  // namespace tessera::engine
