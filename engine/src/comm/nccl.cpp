// The NCCL backend (nccl.h says what it guarantees and why it reduces by itself).
#include "tessera/engine/comm/nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deadline.h"
#include "tessera/engine/comm/chunk_layout.h"
#include "tessera/engine/cuda/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

Error comm_failure(std::string message) { return make_error(ErrorCode::comm_error, std::move(message)); }

Status cuda_status(cudaError_t code, const char* call) {
  if (code == cudaSuccess) return Status::success();
  cudaGetLastError();  // clear a non-sticky error so that later calls do not report it
  return comm_failure(std::string(call) + " failed: " + cudaGetErrorString(code));
}

// ncclInProgress is not a failure: a nonblocking communicator's call is
// still being queued (settled by NcclState::settle).
Status nccl_status(ncclResult_t code, const char* call, ncclComm_t comm) {
  if (code == ncclSuccess || code == ncclInProgress) return Status::success();
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(code);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  return comm_failure(std::move(message));
}

ncclDataType_t nccl_type(DataType type) {
  switch (type) {
    case DataType::f64: return ncclFloat64;
    case DataType::f32: return ncclFloat32;
    case DataType::bf16: return ncclBfloat16;
    case DataType::f16: return ncclFloat16;
  }
  return ncclFloat32;
}

const std::byte* at(const void* base, size_t elements, DataType type) { return static_cast<const std::byte*>(base) + elements * element_bytes(type); }
std::byte* at(void* base, size_t elements, DataType type) { return static_cast<std::byte*>(base) + elements * element_bytes(type); }

cudaError_t launch_ordered_reduce(void* out, const void* slices, int n, size_t count, DataType type, ReduceOp op, cudaStream_t stream) {
  const auto k = static_cast<int64_t>(count);
  const bool take_max = op == ReduceOp::max;
  switch (type) {
    case DataType::f32: return cuda::ordered_reduce(static_cast<float*>(out), static_cast<const float*>(slices), n, k, take_max, stream);
    case DataType::f64: return cuda::ordered_reduce(static_cast<double*>(out), static_cast<const double*>(slices), n, k, take_max, stream);
    case DataType::bf16: return cuda::ordered_reduce(static_cast<bf16*>(out), static_cast<const bf16*>(slices), n, k, take_max, stream);
    case DataType::f16: return cuda::ordered_reduce(static_cast<fp16*>(out), static_cast<const fp16*>(slices), n, k, take_max, stream);
  }
  return cudaErrorInvalidValue;
}

// NCCL's nonblocking communicators (ncclConfig_t.blocking = 0): no call
// blocks the host; each may return ncclInProgress, polled with
// ncclCommGetAsyncError (nccl.h says where NCCL documents it).
ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// One NCCL communicator with its stream, shared by the communicator and its
// started calls. After an error or a timeout it is aborted and every later
// call fails at once.
class NcclState {
 public:
  NcclState(ncclComm_t comm, cudaStream_t compute, std::chrono::duration<double> timeout, MemoryLedger* ledger = nullptr)
      : comm_(comm), compute_(compute), timeout_(timeout), ledger_(ledger) {}
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;

  // The stream and the event the calls need; the communicator is aborted if they cannot be made.
  Status open() {
    if (auto s = cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); !s) return fail(s.error());
    if (auto s = cuda_status(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !s) return fail(s.error());
    return Status::success();
  }

  // Finalises the communicator (NCCL's normal termination, as nccl.h 2.28
  // describes it: ncclCommFinalize flushes its calls, then ncclCommDestroy
  // frees it), by the timeout; one that fails or does not finalise in time is
  // aborted (settle).
  ~NcclState() {
    if (comm_ != nullptr) {
      const ncclResult_t finalized = ncclCommFinalize(comm_);
      if (finalized == ncclInProgress ? settle(Deadline(timeout_), "ncclCommFinalize").ok() : finalized == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else if (comm_ != nullptr) {
        ncclCommAbort(comm_);
      }
    }
    if (inputs_ready_ != nullptr) cudaEventDestroy(inputs_ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Hands the communicator to its caller: this state no longer finalises it.
  void release() { comm_ = nullptr; }

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  std::chrono::duration<double> timeout() const { return timeout_; }
  cudaStream_t compute_stream() const { return compute_; }
  MemoryLedger* ledger() const { return ledger_; }

  Status usable() const {
    if (comm_ != nullptr) return Status::success();
    return comm_failure("the NCCL communicator was aborted after an earlier error or timeout; stop the run");
  }

  // The communicator's stream waits for the work queued so far on the compute stream.
  Status after_compute() {
    if (auto s = usable(); !s) return s;
    if (auto s = cuda_status(cudaEventRecord(inputs_ready_, compute_), "cudaEventRecord"); !s) return s;
    return cuda_status(cudaStreamWaitEvent(stream_, inputs_ready_, 0), "cudaStreamWaitEvent");
  }

  // Waits until NCCL has queued the calls just made (ncclCommGetAsyncError no
  // longer ncclInProgress): later work on the stream must come after them.
  Status settle(const Deadline& deadline, const char* operation) {
    return finish(poll_until_done([&] { return async_state(operation); }, deadline, operation, 0));
  }

  // Whether `done` (recorded after a call's work) has completed, or the communicator's error.
  Result<bool> test(cudaEvent_t done, const char* operation) {
    if (auto s = usable(); !s) return s.error();
    if (auto state = async_state(operation); !state.ok()) return fail(state.error()).error();
    const cudaError_t query = cudaEventQuery(done);
    if (query == cudaErrorNotReady) return false;
    if (auto s = cuda_status(query, "cudaEventQuery"); !s) return fail(s.error()).error();
    return true;
  }

  Status wait(cudaEvent_t done, const Deadline& deadline, const char* operation, size_t payload_bytes) {
    return finish(poll_until_done([&] { return test(done, operation); }, deadline, operation, payload_bytes));
  }

  // Aborts the communicator after `error` (ncclCommAbort after an error or a
  // hang, nccl.h) and returns it.
  Status fail(const Error& error) {
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return error;
  }

 private:
  // ncclCommGetAsyncError: true when nothing is in progress, else false; an
  // error aborts the communicator.
  Result<bool> async_state(const char* operation) {
    if (auto s = usable(); !s) return s.error();
    ncclResult_t state = ncclSuccess;
    if (auto s = nccl_status(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError", comm_); !s) return fail(s.error()).error();
    if (state == ncclInProgress) return false;
    if (auto s = nccl_status(state, operation, comm_); !s) return fail(s.error()).error();
    return true;
  }

  // A timeout aborts the communicator: its calls may never complete.
  Status finish(Status waited) {
    if (!waited.ok() && comm_ != nullptr) return fail(make_error(waited.error().code, waited.error().message + "; the NCCL communicator was aborted (ncclCommAbort)"));
    return waited;
  }

  ncclComm_t comm_;
  cudaStream_t compute_;
  std::chrono::duration<double> timeout_;
  MemoryLedger* ledger_;  // books the reductions' scratch (NcclOptions::ledger); may be null
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr;
};

// Waits for a communicator being made (nonblocking) to be ready; aborts it
// if it fails or is not ready by `timeout`.
Status settle_new(ncclComm_t comm, const char* operation, std::chrono::duration<double> timeout) {
  NcclState waiting(comm, nullptr, timeout);
  const Status settled = waiting.settle(Deadline(timeout), operation);
  waiting.release();  // adopt() owns it from here, or it was aborted
  return settled;
}

// An event recorded after a call's work on the communicator's stream.
class DoneEvent {
 public:
  DoneEvent() = default;
  DoneEvent(const DoneEvent&) = delete;
  DoneEvent& operator=(const DoneEvent&) = delete;
  // Destroying an event whose work is pending is allowed: CUDA releases it
  // once the work completes (CUDA Runtime API, cudaEventDestroy).
  ~DoneEvent() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  Status record(cudaStream_t stream) {
    if (auto s = cuda_status(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !s) return s;
    return cuda_status(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// A call queued on the communicator's stream: test() and wait() ask its event.
class PendingNcclCall final : public Communicator::PendingCall {
 public:
  PendingNcclCall(std::shared_ptr<NcclState> state, const char* operation, size_t payload_bytes)
      : state_(std::move(state)), operation_(operation), payload_(payload_bytes), deadline_(state_->timeout()) {}
  Status record() { return done_.record(state_->stream()); }
  Result<bool> test() override { return state_->test(done_.get(), operation_); }
  Status wait() override { return state_->wait(done_.get(), deadline_, operation_, payload_); }

 private:
  std::shared_ptr<NcclState> state_;
  const char* operation_;
  size_t payload_;
  Deadline deadline_;
  DoneEvent done_;
};

// Device scratch from CUDA's stream-ordered allocator (CUDA C++ Programming
// Guide, "Stream Ordered Memory Allocator"): taken and given back in the
// communicator's stream order, so a started call's scratch lives exactly as
// long as its work. Booked in the ledger under comm_buffers from the call's
// queuing to the queuing of its free: the calls are queued one after another
// on one stream, whose frees the next allocation on it may reuse at once
// (the same guide, "Stream ordered allocation semantics"), so the device
// holds one call's scratch at a time, as the ledger books it.
class StreamScratch {
 public:
  Status take(size_t bytes, cudaStream_t stream, MemoryLedger* ledger) {
    stream_ = stream;
    if (auto s = cuda_status(cudaMallocAsync(&memory_, bytes, stream), "cudaMallocAsync (reduction scratch, comm_buffers)"); !s) return s;
    if (ledger != nullptr) ledger->allocated(MemoryCategory::comm_buffers, MemorySpace::device, static_cast<int64_t>(bytes));
    ledger_ = ledger, bytes_ = bytes;
    return Status::success();
  }
  ~StreamScratch() {
    if (memory_ != nullptr) cudaFreeAsync(memory_, stream_);
    if (ledger_ != nullptr) ledger_->freed(MemoryCategory::comm_buffers, MemorySpace::device, static_cast<int64_t>(bytes_));
  }
  void* get() const { return memory_; }

 private:
  void* memory_ = nullptr;
  cudaStream_t stream_ = nullptr;
  MemoryLedger* ledger_ = nullptr;
  size_t bytes_ = 0;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclState> state, int rank, int size, int world_rank, std::string name)
      : Communicator(rank, size, world_rank, std::move(name)), state_(std::move(state)) {}

  // A communicator over `comm`, just made (ncclCommInitRankConfig, ncclCommSplit) and settled.
  static Result<std::unique_ptr<Communicator>> adopt(ncclComm_t comm, cudaStream_t compute, std::chrono::duration<double> timeout, MemoryLedger* ledger,
                                                     int world_rank, std::string name) {
    auto state = std::make_shared<NcclState>(comm, compute, timeout, ledger);
    if (auto s = state->open(); !s) return s.error();
    int rank = 0, size = 0;
    if (auto s = nccl_status(ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm); !s) return state->fail(s.error()).error();
    if (auto s = nccl_status(ncclCommCount(comm, &size), "ncclCommCount", comm); !s) return state->fail(s.error()).error();
    return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(std::move(state), rank, size, world_rank, std::move(name)));
  }

 private:
  // Queues `enqueue` (NCCL calls and kernels on the communicator's stream)
  // after the compute stream's work, and an event after it.
  template <typename Enqueue>
  Result<std::unique_ptr<PendingNcclCall>> start(const char* operation, size_t payload_bytes, Enqueue enqueue) {
    if (auto s = state_->after_compute(); !s) return s.error();
    auto call = std::make_unique<PendingNcclCall>(state_, operation, payload_bytes);
    if (auto s = enqueue(Deadline(state_->timeout())); !s) return state_->fail(s.error()).error();
    if (auto s = call->record(); !s) return state_->fail(s.error()).error();
    return call;
  }

  template <typename Enqueue>
  Status run(const char* operation, size_t payload_bytes, Enqueue enqueue) {
    auto call = start(operation, payload_bytes, enqueue);
    if (!call) return call.error();
    return call.value()->wait();
  }

  // ncclGroupStart, `calls`, ncclGroupEnd, settled: NCCL queues grouped
  // point-to-point calls as one operation, so sends and receives between
  // every pair proceed together (NCCL user guide, "Group Calls").
  template <typename Calls>
  Status grouped(const Deadline& deadline, const char* operation, Calls calls) {
    ncclComm_t comm = state_->comm();
    if (auto s = nccl_status(ncclGroupStart(), "ncclGroupStart", comm); !s) return s;
    const Status queued = calls(comm);
    const Status ended = nccl_status(ncclGroupEnd(), "ncclGroupEnd", comm);
    if (!queued) return queued;
    if (!ended) return ended;
    return state_->settle(deadline, operation);
  }

  // `transfers` (chunk_layout.h) as one group of ncclSend/ncclRecv from
  // `send` into `recv`; a count of 0 is no call, on both sides.
  Status transfer(const std::vector<PeerTransfer>& transfers, const void* send, void* recv, DataType type, const Deadline& deadline,
                  const char* operation) {
    return grouped(deadline, operation, [&](ncclComm_t comm) {
      const cudaStream_t stream = state_->stream();
      for (const PeerTransfer& t : transfers) {
        if (t.send_count > 0) {
          if (auto s = nccl_status(ncclSend(at(send, t.send_offset, type), t.send_count, nccl_type(type), t.peer, comm, stream), "ncclSend", comm); !s) {
            return s;
          }
        }
        if (t.recv_count > 0) {
          if (auto s = nccl_status(ncclRecv(at(recv, t.recv_offset, type), t.recv_count, nccl_type(type), t.peer, comm, stream), "ncclRecv", comm); !s) {
            return s;
          }
        }
      }
      return Status::success();
    });
  }

  // Every rank's copy of chunk rank() of `send` (laid out as `chunks`) into
  // `scratch`, one after another in rank order (size() slices of `mine`):
  // this rank's own by a copy, the others' by chunk_exchange.
  Status exchange_chunks(const void* send, const ChunkLayout<size_t>& chunks, void* scratch, DataType type, const Deadline& deadline) {
    const auto me = static_cast<size_t>(rank());
    const size_t mine = chunks.counts[me];
    if (mine > 0) {
      if (auto s = cuda_status(cudaMemcpyAsync(at(scratch, me * mine, type), at(send, chunks.offsets[me], type), mine * element_bytes(type),
                                               cudaMemcpyDeviceToDevice, state_->stream()),
                               "cudaMemcpyAsync");
          !s) {
        return s;
      }
    }
    return transfer(chunk_exchange(chunks, rank()), send, scratch, type, deadline, "ncclSend/ncclRecv (chunk exchange)");
  }

  // Exchanges chunk rank() and reduces it in rank order into `out`. A rank
  // whose chunk is empty (a one-element all-reduce, a bucket run that other
  // ranks own, reduce_scatter_v) only sends: no zero-byte scratch, copy or kernel.
  Status reduce_my_chunk(const void* send, void* out, const ChunkLayout<size_t>& chunks, DataType type, ReduceOp op, const Deadline& deadline) {
    const size_t mine = chunks.counts[static_cast<size_t>(rank())];
    StreamScratch scratch;
    if (mine > 0) {
      if (auto s = scratch.take(mine * static_cast<size_t>(size()) * element_bytes(type), state_->stream(), state_->ledger()); !s) return s;
    }
    if (auto s = exchange_chunks(send, chunks, scratch.get(), type, deadline); !s) return s;
    if (mine == 0) return Status::success();
    return cuda_status(launch_ordered_reduce(out, scratch.get(), size(), mine, type, op, state_->stream()), "the rank-order reduction kernel");
  }

  // all_reduce (nccl.h): the chunk exchange, the reduction, then every
  // reduced chunk to every rank.
  Status enqueue_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, const Deadline& deadline) {
    const auto chunks = balanced_chunks<size_t>(count, size());
    const auto me = static_cast<size_t>(rank());
    // In place is safe: the exchange has read all of `send` (stream order) before the reduced chunk is written over it.
    if (auto s = reduce_my_chunk(send, at(recv, chunks.offsets[me], type), chunks, type, op, deadline); !s) return s;
    if (size() == 1) return Status::success();
    return transfer(chunk_gather(chunks, rank()), recv, recv, type, deadline, "ncclSend/ncclRecv (reduced chunks)");
  }

  Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    return run("ncclSend/ncclRecv (all_reduce)", count * element_bytes(type),
               [&](const Deadline& deadline) { return enqueue_all_reduce(send, recv, count, type, op, deadline); });
  }

  Result<std::unique_ptr<PendingCall>> do_start_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    auto call = start("ncclSend/ncclRecv (all_reduce)", count * element_bytes(type),
                      [&](const Deadline& deadline) { return enqueue_all_reduce(send, recv, count, type, op, deadline); });
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    const size_t payload = recv_count * static_cast<size_t>(size()) * element_bytes(type);
    return run("ncclSend/ncclRecv (reduce_scatter)", payload, [&](const Deadline& deadline) {
      return reduce_my_chunk(send, recv, equal_chunks<size_t>(recv_count, size()), type, op, deadline);
    });
  }

  Status do_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op) override {
    size_t total = 0;
    for (const size_t count : recv_counts) total += count;
    return run("ncclSend/ncclRecv (reduce_scatter)", total * element_bytes(type), [&](const Deadline& deadline) {
      return reduce_my_chunk(send, recv, given_chunks<size_t>(recv_counts), type, op, deadline);
    });
  }

  // Queued on the communicator's stream after the compute stream's work, as
  // the started all-reduce: the compute stream goes on with backward.
  Result<std::unique_ptr<PendingCall>> do_start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type,
                                                                 ReduceOp op) override {
    size_t total = 0;
    for (const size_t count : recv_counts) total += count;
    auto call = start("ncclSend/ncclRecv (reduce_scatter)", total * element_bytes(type), [&](const Deadline& deadline) {
      return reduce_my_chunk(send, recv, given_chunks<size_t>(recv_counts), type, op, deadline);
    });
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  // In place (send == recv + rank · send_count) is NCCL's own in-place all-gather.
  Status enqueue_all_gather(const void* send, void* recv, size_t send_count, DataType type, const Deadline& deadline) {
    ncclComm_t comm = state_->comm();
    if (auto s = nccl_status(ncclAllGather(send, recv, send_count, nccl_type(type), comm, state_->stream()), "ncclAllGather", comm); !s) return s;
    return state_->settle(deadline, "ncclAllGather");
  }

  Status do_all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    return run("ncclAllGather", send_count * static_cast<size_t>(size()) * element_bytes(type),
               [&](const Deadline& deadline) { return enqueue_all_gather(send, recv, send_count, type, deadline); });
  }

  // Queued on the communicator's stream after the compute stream's work, as
  // the started all-reduce: the compute stream goes on with the current unit.
  Result<std::unique_ptr<PendingCall>> do_start_all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    auto call = start("ncclAllGather", send_count * static_cast<size_t>(size()) * element_bytes(type),
                      [&](const Deadline& deadline) { return enqueue_all_gather(send, recv, send_count, type, deadline); });
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  // sendbuff is read on the root only (NCCL's API); send == recv is in place.
  Status do_broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    return run("ncclBroadcast", count * element_bytes(type), [&](const Deadline& deadline) {
      ncclComm_t comm = state_->comm();
      if (auto s = nccl_status(ncclBroadcast(send, recv, count, nccl_type(type), root, comm, state_->stream()), "ncclBroadcast", comm); !s) return s;
      return state_->settle(deadline, "ncclBroadcast");
    });
  }

  static Status only_tag_zero(int tag) {
    if (tag == 0) return Status::success();
    return make_error(ErrorCode::invalid_argument, "tag " + std::to_string(tag) +
                                                       ": NCCL matches messages between two ranks by order only, so the NCCL backend takes tag 0 only (nccl.h)");
  }

  Status do_send(const void* send, size_t count, DataType type, int peer, int tag) override {
    if (auto s = only_tag_zero(tag); !s) return s;
    return run("ncclSend", count * element_bytes(type), [&](const Deadline& deadline) {
      ncclComm_t comm = state_->comm();
      if (auto s = nccl_status(ncclSend(send, count, nccl_type(type), peer, comm, state_->stream()), "ncclSend", comm); !s) return s;
      return state_->settle(deadline, "ncclSend");
    });
  }

  Status do_recv(void* recv, size_t count, DataType type, int peer, int tag) override {
    if (auto s = only_tag_zero(tag); !s) return s;
    return run("ncclRecv", count * element_bytes(type), [&](const Deadline& deadline) {
      ncclComm_t comm = state_->comm();
      if (auto s = nccl_status(ncclRecv(recv, count, nccl_type(type), peer, comm, state_->stream()), "ncclRecv", comm); !s) return s;
      return state_->settle(deadline, "ncclRecv");
    });
  }

  // NCCL's sendrecv: the two calls in one group, so that they progress
  // together (NCCL user guide, "Point-to-point communication", Sendrecv:
  // "calls within a group can be seen as progressing independently, hence
  // should never block each other"); ungrouped, a send blocks until its peer's
  // recv has run, and two stages each sending to the other first would wait forever.
  Status do_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type) override {
    return run("ncclSend/ncclRecv (send_recv)", count * element_bytes(type),
               [&](const Deadline& deadline) { return enqueue_send_recv(send, send_peer, recv, recv_peer, count, type, deadline); });
  }

  // Queued on the communicator's stream after the compute stream's work, as
  // the started all-reduce: the compute stream goes on (the sequence-parallel
  // GEMM on the chunk before, model/sequence_overlap.h).
  Result<std::unique_ptr<PendingCall>> do_start_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count,
                                                          DataType type) override {
    auto call = start("ncclSend/ncclRecv (send_recv)", count * element_bytes(type),
                      [&](const Deadline& deadline) { return enqueue_send_recv(send, send_peer, recv, recv_peer, count, type, deadline); });
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  Status enqueue_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type, const Deadline& deadline) {
    return grouped(deadline, "ncclSend/ncclRecv (send_recv)", [&](ncclComm_t comm) {
      const cudaStream_t stream = state_->stream();
      if (auto s = nccl_status(ncclSend(send, count, nccl_type(type), send_peer, comm, stream), "ncclSend", comm); !s) return s;
      return nccl_status(ncclRecv(recv, count, nccl_type(type), recv_peer, comm, stream), "ncclRecv", comm);
    });
  }

  // PyTorch's ProcessGroupNCCL::barrier: an all-reduce of one element, waited for.
  Status do_barrier() override {
    return run("ncclAllReduce (barrier)", 0, [&](const Deadline& deadline) {
      StreamScratch one;
      if (auto s = one.take(sizeof(float), state_->stream(), state_->ledger()); !s) return s;
      if (auto s = cuda_status(cudaMemsetAsync(one.get(), 0, sizeof(float), state_->stream()), "cudaMemsetAsync"); !s) return s;
      ncclComm_t comm = state_->comm();
      if (auto s = nccl_status(ncclAllReduce(one.get(), one.get(), 1, ncclFloat32, ncclSum, comm, state_->stream()), "ncclAllReduce", comm); !s) return s;
      return state_->settle(deadline, "ncclAllReduce (barrier)");
    });
  }

  // ncclCommSplit keeps MPI_Comm_split's rules: the same colour makes a group,
  // ordered by key, ties by the rank in this group (NCCL API, ncclCommSplit).
  Result<std::unique_ptr<Communicator>> do_split(int color, int key, std::string name) override {
    if (auto s = state_->usable(); !s) return s.error();
    ncclConfig_t config = nonblocking_config();
    ncclComm_t group = nullptr;
    ncclComm_t parent = state_->comm();
    if (auto s = nccl_status(ncclCommSplit(parent, color, key, &group, &config), "ncclCommSplit", parent); !s) return state_->fail(s.error()).error();
    if (auto s = settle_new(group, "ncclCommSplit", state_->timeout()); !s) return s.error();
    return adopt(group, state_->compute_stream(), state_->timeout(), state_->ledger(), world_rank(), std::move(name));
  }

 private:
  std::shared_ptr<NcclState> state_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap, const NcclOptions& options) {
  const std::string where = "making NCCL communicator '" + bootstrap.name() + "' (rank " + std::to_string(bootstrap.rank()) + " of " +
                            std::to_string(bootstrap.size()) + "): ";
  if (auto s = positive_timeout(options.timeout); !s) return s.error();
  if (auto s = cuda_status(cudaSetDevice(options.device), "cudaSetDevice"); !s) {
    return comm_failure(where + "CUDA device " + std::to_string(options.device) + " cannot be used (no CUDA device?): " + s.error().message);
  }
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    if (auto s = nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr); !s) return comm_failure(where + s.error().message);
  }
  if (auto s = broadcast_bytes(bootstrap, &id, sizeof id, 0); !s) return comm_failure(where + s.error().message);
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  if (auto s = nccl_status(ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config), "ncclCommInitRankConfig", comm); !s) {
    if (comm != nullptr) ncclCommAbort(comm);
    return comm_failure(where + s.error().message);
  }
  if (auto s = settle_new(comm, "ncclCommInitRankConfig", options.timeout); !s) return comm_failure(where + s.error().message);
  auto made = NcclCommunicator::adopt(comm, options.compute_stream, options.timeout, options.ledger, bootstrap.world_rank(), bootstrap.name());
  if (!made) return comm_failure(where + made.error().message);
  return made;
}

}  // namespace tessera::engine::comm
