// The engine's only way to talk to other ranks: one group of ranks and the
// collectives and point-to-point calls over it. Backends: local (one rank,
// local.h), mpi (mpi.h), nccl (nccl.h, with the CUDA backend).
//
// Conventions (NCCL's, so that the CUDA backend can keep them):
//  - Argument order: send buffer, receive buffer, count, type, then op / root / peer.
//  - Counts are per rank, as NCCL counts them: all_reduce and broadcast move
//    `count` elements; reduce_scatter delivers `recv_count` to each rank out of
//    size · recv_count; all_gather takes `send_count` from each rank into
//    size · send_count.
//  - Rank order: a group's ranks are 0..size-1. reduce_scatter gives rank r the
//    elements [r · recv_count, (r+1) · recv_count) of the reduced input; all_gather
//    puts rank r's elements at [r · send_count, (r+1) · send_count) of the output.
//  - In place is allowed exactly where NCCL's user guide allows it ("In-place
//    Operations", docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/inplace.html):
//    all_reduce and broadcast: send == recv; reduce_scatter: recv == send + rank ·
//    recv_count; all_gather: send == recv + rank · send_count. Any other overlap
//    of the two buffers is refused with invalid_argument.
//  - Every rank of the group makes the same calls in the same order with the same
//    count, type, op and root (as MPI and NCCL require). A mismatch is an error
//    where a rank can see it (a receive longer or shorter than expected); others
//    cannot be detected locally and would hang, which the MPI backend's timeout
//    turns into an error (mpi.h).
//  - Every call is blocking (it returns when this rank's buffers may be
//    reused), except start_send and start_send_recv (below), start_all_reduce,
//    start_reduce_scatter_v and start_all_gather: they start the call and return at once,
//    progress() lets started calls advance while the caller computes, and
//    finish_started() (or finish_oldest(n), the n oldest) completes them, in
//    the order they were started. While a started call is pending its buffers
//    belong to the communicator, and the only calls allowed are the starts,
//    progress, finish_oldest and finish_started (so that every rank starts its
//    collectives in one order, as MPI-3.1 §5.12 requires of nonblocking
//    collectives; any other call is refused).
//  - A count of 0 is a no-op on every backend (buffers may then be null); it is
//    still counted as a call.
//
// Reductions are deterministic: the result of a sum is evaluated in rank order,
// ((x_0 + x_1) + x_2) + ... + x_{size-1}, for each element, and is bit-identical
// on every rank and in every run with the same group size, whatever the backend's
// algorithms. MPI does not promise this (see mpi.h), so backends reduce with
// reduce_in_rank_order (ordered_reduce.h). reduce_scatter's chunks are therefore
// bit for bit the same elements of all_reduce on the same input.
//
// Errors: every call returns Status. A failure names the call, the group, the
// rank and, for MPI, the MPI error ("recv on 'world' (rank 1 of 4, world rank 1):
// MPI_Irecv failed: MPI_ERR_TRUNCATE: message truncated"). After a backend error the group
// may be unusable (MPI-3.1 §8.3 leaves MPI's state undefined after an error):
// stop the run; argument errors found before any communication leave it usable.
//
// Not thread-safe: one thread calls a communicator at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/comm/comm_types.h"
#include "tessera/engine/timeline.h"
#include "tessera/planner/status.h"

namespace tessera::engine::comm {

// The default communication timeout of the backends that wait for other
// ranks (MPI, NCCL). It must exceed the longest legitimate
// wait: the other ranks wait at the next collective while one writes a
// checkpoint or loads a data shard. A GPT-2 checkpoint with Adam's moments is
// about 1.5 GB, some 15 s to a 100 MB/s disk; 300 s leaves a wide margin and
// still ends a dead job within five minutes. Raise it for larger models or
// slow shared file systems.
inline constexpr std::chrono::duration<double> kDefaultCommTimeout{300.0};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The group's name for messages: "world", or what split() was told ("dp", "tp").
  const std::string& name() const { return name_; }
  // This rank in the launcher's world, for messages from sub-groups.
  int world_rank() const { return world_rank_; }
  const CommCounters& counters() const { return counters_; }
  // Every completed call from now on is also recorded in `timeline`, in
  // `lane` (null: none); the caller keeps the timeline alive.
  void record_into(Timeline* timeline, TimelineLane lane) {
    timeline_ = timeline;
    timeline_lane_ = lane;
  }

  // recv[i] = op over ranks of send[i], i < count, on every rank. In place: send == recv.
  Status all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // send holds size · recv_count elements on every rank; rank r's recv gets
  // elements [r · recv_count, (r+1) · recv_count) of the reduction.
  // In place: recv == send + rank · recv_count.
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op);
  // reduce_scatter with a count per rank (MPI_Reduce_scatter's recvcounts):
  // send holds the sum of recv_counts elements on every rank, and rank r's
  // recv gets the reduction of the recv_counts[r] elements that follow those
  // of ranks 0..r-1. In place: recv == send + that offset. Counted as a
  // reduce_scatter of the whole input. A backend without it says so.
  Status reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op);
  // recv (size · send_count elements) gets rank r's send_count elements at
  // offset r · send_count, on every rank. In place: send == recv + rank · send_count.
  Status all_gather(const void* send, void* recv, size_t send_count, DataType type);
  // Every rank's recv gets root's send. send is read on root only (may be null
  // elsewhere). In place: send == recv.
  Status broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  // To and from another rank of this group (peer != rank()). Messages between two
  // ranks arrive in the order they were sent (MPI-3.1 §3.5). A send may wait for
  // the matching recv (MPI's standard mode, §3.4), so two ranks that both send
  // first can deadlock: order the calls (e.g. even ranks send first).
  // A recv whose message is not exactly `count` elements fails. `tag` (>= 0)
  // tells apart kinds of messages between the same two ranks (a pipeline's
  // activations and gradients): a recv takes the oldest message of its tag.
  Status send(const void* send, size_t count, DataType type, int peer, int tag = 0);
  Status recv(void* recv, size_t count, DataType type, int peer, int tag = 0);
  // A send that returns at once (MPI_Isend): `buffer` belongs to the
  // communicator until finish_send(buffer) or finish_sends() has returned.
  // Unlike started all-reduces, started sends do not hold up other calls: a
  // recv or a collective may run while they are pending (a pipeline stage
  // receives its next input while its last output is still on its way, so
  // that two stages sending to each other never wait for each other).
  Status start_send(const void* buffer, size_t count, DataType type, int peer, int tag = 0);
  // Waits for the started sends (and send_recvs) that read `buffer` (none: returns at once).
  Status finish_send(const void* buffer);
  Status finish_sends();
  size_t started_sends() const;
  // send_recv (below), started as start_send is: both buffers belong to the
  // communicator until finish_recv(recv) or finish_send(send) has returned,
  // which waits for both halves; `recv` then holds the message, which must be
  // exactly `count` elements (else the finish fails). Sequence-parallel
  // chunks move so while the caller computes on the one before
  // (model/sequence_overlap.h). Counted as a send and a recv when it completes.
  Status start_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type);
  // Waits for the started send_recv into `buffer` (none: returns at once).
  Status finish_recv(const void* buffer);
  // A send of `send` to `send_peer` and a recv into `recv` from `recv_peer`
  // (`count` elements each, tag 0) in flight together, returning when both
  // have completed; a peer of -1 leaves that half out. A pipeline stage hands
  // its output on and takes its next input in one such call, as Megatron-LM's
  // p2p_communication does (send_forward_recv_backward, batch_isend_irecv), so
  // that no backend whose send waits for its recv (NCCL's) deadlocks two stages
  // sending to each other. Counted as a send and a recv.
  Status send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type);
  Status barrier();

  // all_reduce, started (see the conventions above): PyTorch DDP's bucket
  // all-reduce, launched as soon as backward completes a bucket (Li et al.
  // 2020, "PyTorch Distributed", §3.2.3). Arguments are checked here; the
  // result is bit-identical to all_reduce's. Counted when it completes.
  Status start_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // reduce_scatter_v, started (see the conventions above): ZeRO's bucket
  // reduce-scatter, launched as soon as backward has filled a bucket, while
  // backward goes on into another (DeepSpeed's overlap_comm, ColossalAI's
  // overlap_communication; parallel/zero_overlap.h). Arguments are checked as
  // reduce_scatter_v's; the result is bit-identical to it. Counted when it completes.
  Status start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op);
  // all_gather, started (see the conventions above): FSDP's prefetch, the
  // next unit's all-gather issued before the current unit computes
  // (forward_prefetch, BACKWARD_PRE; src/cuda/fsdp_shards.h). Arguments are
  // checked as all_gather's; the result is bit-identical to it. Counted when it completes.
  Status start_all_gather(const void* send, void* recv, size_t send_count, DataType type);
  // Advances the started calls without waiting: MPI advances a nonblocking
  // call only inside MPI calls, so call this between pieces of compute.
  // Returns the first error of a call that failed.
  Status progress();
  // Waits for every started call to complete, in the order started.
  Status finish_started();
  // Waits for the `calls` oldest started calls (all of them if fewer are
  // pending), in the order started; the younger ones stay pending. A bucket
  // whose reduction was started before another's is free again after it.
  Status finish_oldest(size_t calls);
  size_t started_calls() const { return started_.size(); }

  // A started call, as a backend tracks it (backends implement it). test() advances it without
  // waiting and says whether it has completed; wait() returns when it has (or
  // the backend's timeout passed). Neither is called again after an error.
  class PendingCall {
   public:
    virtual ~PendingCall() = default;
    virtual Result<bool> test() = 0;
    virtual Status wait() = 0;
  };

  // Collective over this group: ranks passing the same color (>= 0) form a new
  // group, ordered by key, ties by their rank here (MPI_Comm_split, MPI-3.1
  // §6.4.2). `name` labels the new group in messages; empty: "<this name>/<color>".
  // For the dp/tp/pp groups: color = planner::group_index(layout, rank, axis), key = rank.
  Result<std::unique_ptr<Communicator>> split(int color, int key, std::string name = {});

  // The same calls on typed buffers.
  template <CommElement T>
  Status all_reduce(const T* send, T* recv, size_t count, ReduceOp op) {
    return all_reduce(static_cast<const void*>(send), recv, count, data_type_of<T>(), op);
  }
  template <CommElement T>
  Status start_all_reduce(const T* send, T* recv, size_t count, ReduceOp op) {
    return start_all_reduce(static_cast<const void*>(send), recv, count, data_type_of<T>(), op);
  }
  template <CommElement T>
  Status reduce_scatter(const T* send, T* recv, size_t recv_count, ReduceOp op) {
    return reduce_scatter(static_cast<const void*>(send), recv, recv_count, data_type_of<T>(), op);
  }
  template <CommElement T>
  Status all_gather(const T* send, T* recv, size_t send_count) {
    return all_gather(static_cast<const void*>(send), recv, send_count, data_type_of<T>());
  }
  template <CommElement T>
  Status broadcast(const T* send, T* recv, size_t count, int root) {
    return broadcast(static_cast<const void*>(send), recv, count, data_type_of<T>(), root);
  }
  template <CommElement T>
  Status send(const T* buffer, size_t count, int peer, int tag = 0) {
    return send(static_cast<const void*>(buffer), count, data_type_of<T>(), peer, tag);
  }
  template <CommElement T>
  Status recv(T* buffer, size_t count, int peer, int tag = 0) {
    return recv(static_cast<void*>(buffer), count, data_type_of<T>(), peer, tag);
  }
  template <CommElement T>
  Status send_recv(const T* send, int send_peer, T* recv, int recv_peer, size_t count) {
    return send_recv(static_cast<const void*>(send), send_peer, static_cast<void*>(recv), recv_peer, count, data_type_of<T>());
  }
  template <CommElement T>
  Status start_send(const T* buffer, size_t count, int peer, int tag = 0) {
    return start_send(static_cast<const void*>(buffer), count, data_type_of<T>(), peer, tag);
  }
  template <CommElement T>
  Status start_send_recv(const T* send, int send_peer, T* recv, int recv_peer, size_t count) {
    return start_send_recv(static_cast<const void*>(send), send_peer, static_cast<void*>(recv), recv_peer, count, data_type_of<T>());
  }

 protected:
  Communicator(int rank, int size, int world_rank, std::string name);

  // The backend's half. The public calls above have already checked the
  // arguments (ranks in range, buffers non-null, overlaps as documented,
  // count > 0) and add the context to any error these return; they count bytes
  // on success. Errors here say only what went wrong.
  virtual Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) = 0;
  virtual Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) = 0;
  virtual Status do_all_gather(const void* send, void* recv, size_t send_count, DataType type) = 0;
  // recv_counts has size() entries, their sum > 0; recv is in place or disjoint.
  virtual Status do_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op);
  virtual Status do_broadcast(const void* send, void* recv, size_t count, DataType type, int root) = 0;
  virtual Status do_send(const void* send, size_t count, DataType type, int peer, int tag) = 0;
  virtual Status do_recv(void* recv, size_t count, DataType type, int peer, int tag) = 0;
  virtual Status do_barrier() = 0;
  virtual Result<std::unique_ptr<Communicator>> do_split(int color, int key, std::string name) = 0;

  // The backend's start. By default the call runs to completion here (local
  // and dry-run groups have nothing to overlap); MPI starts it and returns.
  virtual Result<std::unique_ptr<PendingCall>> do_start_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op);
  // The same for reduce_scatter_v (its arguments as do_reduce_scatter_v's).
  virtual Result<std::unique_ptr<PendingCall>> do_start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts,
                                                                         DataType type, ReduceOp op);
  // The same for all_gather.
  virtual Result<std::unique_ptr<PendingCall>> do_start_all_gather(const void* send, void* recv, size_t send_count, DataType type);
  // The same for a send.
  virtual Result<std::unique_ptr<PendingCall>> do_start_send(const void* send, size_t count, DataType type, int peer, int tag);
  // The same for a recv (by default it runs to completion here, as do_recv).
  virtual Result<std::unique_ptr<PendingCall>> do_start_recv(void* recv, size_t count, DataType type, int peer, int tag);
  // Both halves of start_send_recv (arguments as do_send_recv's). By default
  // the recv and then the send are started (do_start_recv, do_start_send) and
  // waited for together.
  virtual Result<std::unique_ptr<PendingCall>> do_start_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type);
  // Both halves of send_recv (both present, count > 0). By default the send
  // is started, the recv run, and the send waited for (MPI_Isend, MPI_Recv, MPI_Wait).
  virtual Status do_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type);

 private:
  // "all_reduce on 'world' (rank 1 of 4, world rank 1): " + what.
  Error failure(std::string_view call, const Error& what) const;
  // Runs `call` (the backend's half) once `payload` holds the checked payload
  // bytes, skips it for count 0, adds the context to errors and counts success.
  template <typename Call>
  Status run(Collective kind, const Result<size_t>& payload, size_t count, Call call);
  // A blocking call refused while started calls are pending.
  Status refuse_while_started(std::string_view call) const;
  // send_recv's and start_send_recv's checked payload (each half's bytes).
  Result<size_t> checked_send_recv_payload(const void* send, int send_peer, const void* recv, int recv_peer, size_t count, DataType type) const;
  // reduce_scatter_v's checked payload (the whole input's bytes) and element count.
  Result<size_t> checked_v_payload(const void* send, const void* recv, const std::vector<size_t>& recv_counts, DataType type, size_t& total) const;
  // Starts a call through `begin` (the backend's start) once `payload` holds
  // the checked payload bytes, skips it for count 0, and queues it.
  template <typename Begin>
  Status start(Collective kind, const Result<size_t>& payload, size_t count, Begin begin);
  // Counts the oldest started call, which has completed, and forgets it.
  void count_oldest_started(std::chrono::steady_clock::time_point now);
  void record(Collective kind, std::chrono::steady_clock::time_point started, std::chrono::steady_clock::time_point finished, size_t payload);
  // Completes at most `calls` of the oldest started calls (see progress, finish_oldest).
  Status complete_started(bool wait, size_t calls);
  // Waits for the started sends and send_recvs for which `which` is true, counting each.
  template <typename Which>
  Status finish_transfers_where(Which which);

  struct StartedCall {
    Collective kind;
    size_t payload;
    std::unique_ptr<PendingCall> call;  // null: nothing to wait for (count 0)
    std::chrono::steady_clock::time_point started;
    double waited_s;  // time spent starting, testing and waiting for it
  };

  int rank_ = 0;
  int size_ = 1;
  int world_rank_ = 0;
  std::string name_;
  CommCounters counters_;
  Timeline* timeline_ = nullptr;
  TimelineLane timeline_lane_ = TimelineLane::compute;
  std::deque<StartedCall> started_;
  struct StartedTransfer {
    const void* send;  // what a send reads (null: none)
    const void* recv;  // what a recv fills (null: none)
    size_t payload;    // of each half
    std::unique_ptr<PendingCall> call;  // null: nothing to wait for (count 0)
    std::chrono::steady_clock::time_point started;
  };
  std::deque<StartedTransfer> transfers_;
};

// `bytes` (n of them) from `root` to every rank of `group`, as a broadcast of
// 16-bit elements (odd lengths padded by one byte): for what is not a number,
// such as the ncclUniqueId that NCCL asks to be sent "using any CPU
// communication system" (NCCL user guide, "Creating a Communicator"). The
// 16-bit elements only travel (no backend reduces a broadcast), so the bytes
// arrive unchanged. Counted as a broadcast.
Status broadcast_bytes(Communicator& group, void* bytes, size_t n, int root);

}  // namespace tessera::engine::comm
