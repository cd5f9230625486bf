// --tp-comm-overlap on the CPU: sequence parallelism's all-gather and
// reduce-scatter as point-to-point chunks (MPI_Isend / MPI_Irecv) in the
// order of planner/tp_overlap_schedule.h, with the GEMM beside them computing
// on the chunk in hand while the next one moves. A chunk is one rank's rows,
// `chunk_elements` = N/tp · width; `whole` holds tp of them in rank order.
//
// Both give the plain collective's result bit for bit: the all-gather only
// moves rows, and the reduce-scatter sums the tp partial chunks in rank order
// with the communicators' own reduction (comm/ordered_reduce.h).
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

// whole = every rank's `mine` (as all_gather); `consume(chunk)` runs on each
// chunk of `whole` as soon as it is there, this rank's own first.
template <comm::CommElement T, typename Consume>
Status overlapped_all_gather(comm::Communicator& group, const T* mine, T* whole, int64_t chunk_elements, Consume consume) {
  const auto n = static_cast<size_t>(chunk_elements);
  const std::vector<planner::TpOverlapStep> steps = planner::tp_overlap_all_gather_steps(group.size(), group.rank());
  std::copy(mine, mine + n, whole + static_cast<size_t>(group.rank()) * n);
  // Every transfer is posted up front (each rank's chunk is ready): recvs first, so no send waits for its match.
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from < 0) continue;
    if (Status s = group.start_recv(whole + static_cast<size_t>(step.chunk) * n, n, static_cast<int>(step.recv_from)); !s) return s;
  }
  for (const planner::TpOverlapStep& step : steps) {
    if (step.send_to < 0) continue;
    if (Status s = group.start_send(mine, n, static_cast<int>(step.send_to)); !s) return s;
  }
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from >= 0) {
      if (Status s = group.finish_recv(whole + static_cast<size_t>(step.chunk) * n); !s) return s;
    }
    consume(step.chunk);
  }
  return group.finish_send(mine);
}

// mine = this rank's chunk of the sum over the group (as reduce_scatter), where
// `produce(chunk, into)` writes this rank's partial of chunk `chunk` into
// `into` (chunk_elements). The other ranks' partials of this rank's chunk
// arrive into their slots of `whole`, this rank's goes into its own, and
// `sends` (planner::tp_overlap_send_buffers chunks) holds those on their way out.
template <comm::CommElement T, typename Produce>
Status overlapped_reduce_scatter(comm::Communicator& group, T* whole, T* sends, T* mine, int64_t chunk_elements, Produce produce) {
  const auto n = static_cast<size_t>(chunk_elements);
  const int64_t tp = group.size(), buffers = planner::tp_overlap_send_buffers(tp);
  const std::vector<planner::TpOverlapStep> steps = planner::tp_overlap_reduce_scatter_steps(tp, group.rank());
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from < 0) continue;
    if (Status s = group.start_recv(whole + static_cast<size_t>(step.recv_from) * n, n, static_cast<int>(step.recv_from)); !s) return s;
  }
  int64_t sent = 0;
  for (const planner::TpOverlapStep& step : steps) {
    if (step.send_to < 0) {
      produce(step.chunk, whole + static_cast<size_t>(step.chunk) * n);
      continue;
    }
    T* out = sends + static_cast<size_t>(sent++ % buffers) * n;
    if (Status s = group.finish_send(out); !s) return s;  // what this buffer held two steps ago
    produce(step.chunk, out);
    if (Status s = group.start_send(out, n, static_cast<int>(step.send_to)); !s) return s;
  }
  for (const planner::TpOverlapStep& step : steps) {
    if (step.recv_from < 0) continue;
    if (Status s = group.finish_recv(whole + static_cast<size_t>(step.recv_from) * n); !s) return s;
  }
  comm::reduce_in_rank_order(mine, whole, static_cast<int>(tp), n, comm::data_type_of<T>(), comm::ReduceOp::sum);
  for (int64_t b = 0; b < std::min(buffers, sent); ++b) {
    if (Status s = group.finish_send(sends + static_cast<size_t>(b) * n); !s) return s;
  }
  return Status::success();
}

}  // namespace tessera::engine
