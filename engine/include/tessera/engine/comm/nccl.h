// The NCCL backend: the communicator's calls (communicator.h) on buffers in
// GPU memory, between one GPU per rank. Built with TESSERA_CUDA where CMake
// finds NCCL (TESSERA_HAVE_NCCL); this header names no CUDA or NCCL type.
//
// Ranks come from the launcher through another communicator (`bootstrap`,
// MPI's world under mpirun, or the local one for one rank): its rank 0 makes
// the ncclUniqueId and broadcasts it (broadcast_bytes), as NCCL's user guide
// asks ("Creating a Communicator"), and every rank joins with its bootstrap
// rank (ncclCommInitRankConfig). Sub-groups are ncclCommSplit, which keeps
// MPI_Comm_split's colour and key rules. Everything that is not an NCCL call
// (argument checks, in-place rules, counters, timeline, started calls,
// naming and errors) is Communicator's, shared with the MPI backend, so the
// counters of a run do not depend on the backend.
//
// Reductions keep the interface's promise (communicator.h): sums are
// evaluated in rank order, bit-identical on every rank and to the MPI
// backend's. NCCL's own ncclAllReduce does not promise an order (its rings
// and trees start at different ranks for different chunks), so all_reduce
// and reduce_scatter do what the MPI backend does, with NCCL's point-to-point
// calls: one grouped ncclSend/ncclRecv per peer brings every rank's copy of
// chunk r to rank r (the all-to-all of NCCL's user guide, "Point-to-point
// communication"), a kernel reduces it in rank order (kernels/ordered_reduce.h,
// the CPU reduction's arithmetic), and all_reduce sends the reduced chunks to
// every rank the same way (chunk_layout.h's chunk_exchange and chunk_gather,
// simulated for every rank on the CPU by tests/comm/chunk_exchange_test.cpp).
// The traffic is a ring all-reduce's; the cost is a scratch buffer of one
// payload (this rank's chunk from every rank: for an all-reduce of n
// elements on p ranks, p · ⌊n/p⌋ or p · ⌈n/p⌉ of them) from CUDA's
// stream-ordered allocator (cudaMallocAsync) while the call runs, booked
// under comm_buffers in NcclOptions::ledger. all_gather and broadcast are
// ncclAllGather and ncclBroadcast; barrier is a one-element ncclAllReduce, as
// PyTorch's ProcessGroupNCCL::barrier does (NCCL has no barrier;
// torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, commit cf1380df).
//
// Streams: the calls run on the communicator's own stream, after the work
// already queued on `compute_stream` (an event recorded there, waited for on
// the communicator's stream), so that buffers the compute stream has written
// are complete: PyTorch's "[Sync Streams]" (syncStreams, same file). A blocking call returns when its work on the GPU has
// completed; start_all_reduce and start_reduce_scatter_v queue the work and
// return, and the gradient reduction runs while the compute stream goes on
// (finish_oldest and finish_started wait).
//
// Timeout (--comm-timeout): the communicator is NCCL's nonblocking kind
// (ncclConfig_t.blocking = 0; NCCL user guide, "Creating a Communicator",
// "Creating a communication with options"), so no NCCL call blocks the host:
// a call that returns ncclInProgress is polled with ncclCommGetAsyncError, and
// the GPU work with cudaEventQuery, until it completes, fails, or `timeout`
// passes (deadline.h, the MPI backend's loop). Then the communicator is
// aborted (ncclCommAbort: the same guide's "Error handling and communicator
// destruction"; PyTorch's NCCL watchdog does the same), the call fails with
// the MPI backend's one line, and every later call fails at once. Making the
// communicator and split() time out the same way.
//
// Limits: one GPU per process (options.device, made current here). NCCL
// matches sends and receives between two ranks by order only, so send and
// recv take tag 0 only (other tags are refused: the pipeline's two tags need
// a communicator each); a recv cannot see that the message is longer or
// shorter than `count` (NCCL's user guide: both sides must agree); a started
// send completes before start_send returns. send_recv is one group of
// ncclSend and ncclRecv (the user guide's Sendrecv), what the GPU pipeline's
// stages exchange (parallel/pipeline_transfers.h); start_send_recv queues that
// group and returns, and --tp-comm-overlap's chunks move so under the GEMMs
// (model/sequence_overlap.h).
// Never run on a GPU yet: tests/cuda/nccl_gpu_test.cpp (one rank) and
// tests/cuda/nccl_ranks_gpu_test.cpp (mpirun, one rank per GPU) are
// tools/gpu-check's.
#pragma once

#include <chrono>
#include <memory>

#include "tessera/engine/comm/communicator.h"
#include "tessera/engine/memory_ledger.h"

struct CUstream_st;  // cudaStream_t is CUstream_st* (cuda_runtime_api.h)

namespace tessera::engine::comm {

struct NcclOptions {
  int device = 0;                          // this rank's CUDA device
  CUstream_st* compute_stream = nullptr;   // the stream the calls wait for; null: the legacy default stream
  std::chrono::duration<double> timeout = kDefaultCommTimeout;
  MemoryLedger* ledger = nullptr;          // books each reduction's scratch under comm_buffers (device), it and its sub-groups'; null: none
};

// A communicator over the ranks of `bootstrap` (collective over it), rank for
// rank, named as `bootstrap`. Fails in one line where the device cannot be
// used ("no CUDA device"), NCCL fails, or the other ranks do not join within
// the timeout.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap, const NcclOptions& options = {});

}  // namespace tessera::engine::comm
