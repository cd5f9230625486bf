// The MPI backend (mpi.h says what it guarantees and why it reduces by itself).
#include "tessera/engine/comm/mpi.h"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "mpi_comm_handle.h"
#include "mpi_status.h"
#include "mpi_wait.h"
#include "tessera/engine/comm/chunk_layout.h"
#include "tessera/engine/comm/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

// 16-bit floats only travel (the sums are ours, ordered_reduce.h): as 16-bit integers.
MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::f64: return MPI_DOUBLE;
    case DataType::f32: return MPI_FLOAT;
    case DataType::bf16:
    case DataType::f16: return MPI_UINT16_T;
  }
  return MPI_FLOAT;
}

// MPI counts and displacements are ints.
Status fits_mpi_int(size_t elements) {
  if (elements <= static_cast<size_t>(INT_MAX)) return Status::success();
  return make_error(ErrorCode::invalid_argument, std::to_string(elements) + " elements exceed MPI's limit of 2^31 - 1 per call; split the buffer");
}

// MPI counts chunks in ints (fits_mpi_int checks the total first).
using Chunks = ChunkLayout<int>;

// How long a communicator's calls may wait, and where the calls that waited too
// long go (shared by all communicators of a runtime).
struct Waiting {
  std::chrono::duration<double> timeout;
  std::shared_ptr<AbandonedCalls> abandoned;
};

// A copy of `comm` (MPI_Comm_idup, collective), by `deadline`.
Result<MpiCommHandle> duplicate(MPI_Comm comm, const Deadline& deadline, AbandonedCalls& abandoned) {
  // The MPI_Comm that MPI_Comm_idup fills in when it completes, which may be after a timeout.
  auto copy = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  const int started = MPI_Comm_idup(comm, copy.get(), &request);
  if (Status s = complete(started, request, deadline, "MPI_Comm_idup", 0, abandoned, {copy}); !s) return s.error();
  return MpiCommHandle(*copy);
}

// What MPI_Ialltoallv and MPI_Iallgatherv are handed besides the caller's
// buffers: MPI may use all of it until the call completes, so a call that
// times out leaves it to AbandonedCalls.
struct ChunkExchange {
  Chunks mine;          // this rank's buffer cut into one chunk per rank
  Chunks gathered;      // every rank's copy of this rank's chunk, one after another
  std::unique_ptr<std::byte[]> scratch;  // holds `gathered`
};

// Starts the first exchange of a reduction: every rank's copy of chunk
// rank() of `send` (laid out as exchange.mine) to this rank, into
// exchange.scratch (size() chunks, laid out as exchange.gathered).
Status start_chunk_exchange(const void* send, ChunkExchange& exchange, DataType type, int rank, int size, MPI_Comm comm, MPI_Request& request) {
  const auto mine = static_cast<size_t>(exchange.mine.counts[static_cast<size_t>(rank)]);
  const size_t scratch_bytes = mine * static_cast<size_t>(size) * element_bytes(type);
  try {
    exchange.scratch = std::make_unique_for_overwrite<std::byte[]>(scratch_bytes);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::invalid_argument, "out of memory allocating " + std::to_string(scratch_bytes) + " bytes of reduction scratch (comm_buffers)");
  }
  exchange.gathered = equal_chunks<int>(mine, size);
  const MPI_Datatype t = mpi_type(type);
  return mpi_status(MPI_Ialltoallv(send, exchange.mine.counts.data(), exchange.mine.offsets.data(), t, exchange.scratch.get(),
                                   exchange.gathered.counts.data(), exchange.gathered.offsets.data(), t, comm, &request),
                    "MPI_Ialltoallv");
}

// What an all_reduce needs from its communicator while it runs.
struct AllReduceContext {
  std::shared_ptr<const MpiCommHandle> comm;         // the first exchange
  std::shared_ptr<const MpiCommHandle> gather_comm;  // the second (see PendingReduction)
  std::shared_ptr<AbandonedCalls> abandoned;
  int rank = 0, size = 1;
};

// One reduction in flight: the chunk exchange, then this rank's chunk reduced
// in rank order when a test or wait sees it complete; an all_reduce then
// all-gathers the chunks (mpi.h: two exchanges), a reduce_scatter_v is done.
// The second exchange starts when a test or wait sees the first complete,
// which may be after other calls were started (Communicator::start_all_reduce,
// start_reduce_scatter_v): it runs on a duplicate of the group's
// communicator, so that it never crosses another call's first exchange in
// MPI's per-communicator order of collectives (MPI-3.1 §5.12). Communicator
// tests the oldest call only, so second exchanges start in the order of the
// calls on every rank.
class PendingReduction final : public Communicator::PendingCall {
 public:
  // `mine`: `send` cut into one chunk per rank; the reduced chunk of this rank
  // goes to `out`; `gather_into`: the all_reduce's output, or null.
  static Result<std::unique_ptr<PendingReduction>> start(const void* send, void* out, Chunks mine, void* gather_into, size_t payload_bytes, DataType type,
                                                         ReduceOp op, AllReduceContext context, std::chrono::duration<double> timeout) {
    std::unique_ptr<PendingReduction> call(new PendingReduction(out, gather_into, payload_bytes, type, op, std::move(context), timeout));
    call->exchange_->mine = std::move(mine);
    // In place is safe: MPI_Ialltoallv has read all of `send` before the
    // reduced chunk is written over it.
    if (Status s = start_chunk_exchange(send, *call->exchange_, type, call->context_.rank, call->context_.size, call->context_.comm->get(),
                                        call->request_);
        !s) {
      return s.error();
    }
    return call;
  }

  // A call dropped while MPI still holds it (an error, or a group abandoned
  // mid-step) keeps what MPI may still use until MPI lets it go.
  ~PendingReduction() override {
    if (request_ != MPI_REQUEST_NULL) context_.abandoned->keep(request_, {exchange_, context_.comm, context_.gather_comm});
  }

  Result<bool> test() override {
    if (exchanging_chunks_) {
      auto done = test_request(request_, MPI_STATUS_IGNORE, mpi_call_);
      if (!done.ok() || !done.value()) return done;
      if (Status s = reduce_then_gather(); !s) return s.error();
    }
    return test_request(request_, MPI_STATUS_IGNORE, mpi_call_);
  }

  Status wait() override { return poll_until_done([this] { return test(); }, deadline_, mpi_call_, payload_); }

 private:
  PendingReduction(void* out, void* gather_into, size_t payload_bytes, DataType type, ReduceOp op, AllReduceContext context,
                   std::chrono::duration<double> timeout)
      : out_(out), gather_into_(gather_into), type_(type), op_(op), payload_(payload_bytes), context_(std::move(context)),
        exchange_(std::make_shared<ChunkExchange>()), deadline_(timeout) {}

  // Reduces this rank's chunk in rank order into out and, for an all_reduce, all-gathers the chunks.
  Status reduce_then_gather() {
    const auto r = static_cast<size_t>(context_.rank);
    reduce_in_rank_order(out_, exchange_->scratch.get(), context_.size, static_cast<size_t>(exchange_->mine.counts[r]), type_, op_);
    exchanging_chunks_ = false;
    if (gather_into_ == nullptr) return Status::success();  // request_ is MPI_REQUEST_NULL: tests complete
    mpi_call_ = "MPI_Iallgatherv";
    return mpi_status(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gather_into_, exchange_->mine.counts.data(), exchange_->mine.offsets.data(),
                                      mpi_type(type_), context_.gather_comm->get(), &request_),
                      mpi_call_);
  }

  void* out_;
  void* gather_into_;
  DataType type_;
  ReduceOp op_;
  size_t payload_;
  AllReduceContext context_;
  std::shared_ptr<ChunkExchange> exchange_;
  Deadline deadline_;  // one for both exchanges, from the start
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool exchanging_chunks_ = true;
  const char* mpi_call_ = "MPI_Ialltoallv";  // the exchange in flight, as errors name it
};

// One send or recv in flight (Communicator::start_send, start_recv). The
// caller's buffer stays the caller's to keep alive; a transfer dropped while
// MPI still holds it keeps its communicator until MPI lets it go.
class PendingTransfer : public Communicator::PendingCall {
 public:
  PendingTransfer(std::shared_ptr<const MpiCommHandle> comm, const Waiting& waiting)
      : comm_(std::move(comm)), abandoned_(waiting.abandoned), deadline_(waiting.timeout) {}
  ~PendingTransfer() override {
    if (request != MPI_REQUEST_NULL) abandoned_->keep(request, {comm_});
  }

  MPI_Request request = MPI_REQUEST_NULL;

 protected:
  const Deadline& deadline() const { return deadline_; }

 private:
  std::shared_ptr<const MpiCommHandle> comm_;
  std::shared_ptr<AbandonedCalls> abandoned_;
  Deadline deadline_;
};

class PendingSend final : public PendingTransfer {
 public:
  PendingSend(std::shared_ptr<const MpiCommHandle> comm, const Waiting& waiting, size_t payload)
      : PendingTransfer(std::move(comm), waiting), payload_(payload) {}
  Result<bool> test() override { return test_request(request, MPI_STATUS_IGNORE, "MPI_Isend"); }
  Status wait() override { return wait_for(request, MPI_STATUS_IGNORE, deadline(), "MPI_Isend", payload_); }

 private:
  size_t payload_;
};

// A completed recv's message must be exactly `count` elements (a longer one
// has already failed with MPI_ERR_TRUNCATE, MPI-3.1 §3.2.4).
Status check_received(const MPI_Status& status, DataType type, size_t count, int peer) {
  int received = 0;
  if (auto s = mpi_status(MPI_Get_count(&status, mpi_type(type), &received), "MPI_Get_count"); !s) return s;
  if (static_cast<size_t>(received) == count) return Status::success();
  return make_error(ErrorCode::invalid_argument,
                    "rank " + std::to_string(peer) + " sent " + std::to_string(received) + " elements, " + std::to_string(count) + " were expected");
}

class PendingRecv final : public PendingTransfer {
 public:
  PendingRecv(std::shared_ptr<const MpiCommHandle> comm, const Waiting& waiting, DataType type, size_t count, int peer)
      : PendingTransfer(std::move(comm), waiting), type_(type), count_(count), peer_(peer) {}
  Result<bool> test() override {
    auto done = test_request(request, &status_, "MPI_Irecv");
    if (!done.ok() || !done.value()) return done;
    if (Status s = check_received(status_, type_, count_, peer_); !s) return s.error();
    return true;
  }
  Status wait() override {
    if (Status s = wait_for(request, &status_, deadline(), "MPI_Irecv", count_ * element_bytes(type_)); !s) return s;
    return check_received(status_, type_, count_, peer_);
  }

 private:
  DataType type_;
  size_t count_;
  int peer_;
  MPI_Status status_{};
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<const MpiRuntime> runtime, MpiCommHandle comm, MpiCommHandle gather_comm, int rank, int size, std::string name,
                  Waiting waiting)
      : Communicator(rank, size, runtime->world_rank(), std::move(name)),
        runtime_(std::move(runtime)),
        comm_(std::make_shared<const MpiCommHandle>(std::move(comm))),
        gather_comm_(std::make_shared<const MpiCommHandle>(std::move(gather_comm))),
        waiting_(std::move(waiting)) {}

  // A communicator over `comm` (just made by MPI_Comm_idup or MPI_Comm_split),
  // which from here on returns its errors.
  static Result<std::unique_ptr<Communicator>> adopt(std::shared_ptr<const MpiRuntime> runtime, MpiCommHandle comm, std::string name,
                                                     Waiting waiting) {
    if (auto s = mpi_status(MPI_Comm_set_errhandler(comm.get(), MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"); !s) return s.error();
    int rank = 0, size = 0;
    if (auto s = mpi_status(MPI_Comm_rank(comm.get(), &rank), "MPI_Comm_rank"); !s) return s.error();
    if (auto s = mpi_status(MPI_Comm_size(comm.get(), &size), "MPI_Comm_size"); !s) return s.error();
    // all_reduce's second exchange runs on a duplicate (PendingReduction).
    auto gather_comm = duplicate(comm.get(), Deadline(waiting.timeout), *waiting.abandoned);
    if (!gather_comm) return gather_comm.error();
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(std::move(runtime), std::move(comm), std::move(gather_comm.value()), rank,
                                                                           size, std::move(name), std::move(waiting)));
  }

 private:
  // comm::complete (mpi_wait.h) for a call on this communicator, which a call
  // left pending keeps alive.
  Status complete(int started, MPI_Request& request, const Deadline& deadline, const char* mpi_call, size_t payload_bytes,
                  std::shared_ptr<const void> in_use = nullptr, MPI_Status* status = MPI_STATUS_IGNORE) {
    return comm::complete(started, request, deadline, mpi_call, payload_bytes, *waiting_.abandoned, {std::move(in_use), comm_}, status);
  }

  // Reduces chunk rank() of `send` (laid out as exchange.mine) over all ranks
  // into `out`, in rank order (start_chunk_exchange, then reduce_in_rank_order).
  Status reduce_my_chunk(const void* send, void* out, const std::shared_ptr<ChunkExchange>& exchange, DataType type, ReduceOp op,
                         const Deadline& deadline, size_t payload_bytes) {
    MPI_Request request = MPI_REQUEST_NULL;
    if (Status s = start_chunk_exchange(send, *exchange, type, rank(), size(), comm_->get(), request); !s) return s;
    if (auto s = complete(MPI_SUCCESS, request, deadline, "MPI_Ialltoallv", payload_bytes, exchange); !s) return s;
    const auto mine = static_cast<size_t>(exchange->mine.counts[static_cast<size_t>(rank())]);
    reduce_in_rank_order(out, exchange->scratch.get(), size(), mine, type, op);
    return Status::success();
  }

  AllReduceContext context() const { return AllReduceContext{comm_, gather_comm_, waiting_.abandoned, rank(), size()}; }

  Result<std::unique_ptr<PendingReduction>> start_all_reduction(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
    if (auto s = fits_mpi_int(count); !s) return s.error();
    Chunks chunks = balanced_chunks<int>(count, size());
    void* mine = static_cast<std::byte*>(recv) + static_cast<size_t>(chunks.offsets[static_cast<size_t>(rank())]) * element_bytes(type);
    return PendingReduction::start(send, mine, std::move(chunks), recv, count * element_bytes(type), type, op, context(), waiting_.timeout);
  }

  Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    auto call = start_all_reduction(send, recv, count, type, op);
    if (!call) return call.error();
    return call.value()->wait();
  }

  Result<std::unique_ptr<PendingCall>> do_start_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    auto call = start_all_reduction(send, recv, count, type, op);
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    if (auto s = fits_mpi_int(recv_count * static_cast<size_t>(size())); !s) return s;
    auto exchange = std::make_shared<ChunkExchange>();
    exchange->mine = equal_chunks<int>(recv_count, size());
    return reduce_my_chunk(send, recv, exchange, type, op, Deadline(waiting_.timeout), recv_count * static_cast<size_t>(size()) * element_bytes(type));
  }

  Status do_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op) override {
    size_t total = 0;
    for (const size_t count : recv_counts) total += count;
    if (auto s = fits_mpi_int(total); !s) return s;
    auto exchange = std::make_shared<ChunkExchange>();
    exchange->mine = given_chunks<int>(recv_counts);
    return reduce_my_chunk(send, recv, exchange, type, op, Deadline(waiting_.timeout), total * element_bytes(type));
  }

  Result<std::unique_ptr<PendingCall>> do_start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type,
                                                                 ReduceOp op) override {
    size_t total = 0;
    for (const size_t count : recv_counts) total += count;
    if (auto s = fits_mpi_int(total); !s) return s.error();
    auto call = PendingReduction::start(send, recv, given_chunks<int>(recv_counts), nullptr, total * element_bytes(type), type, op, context(),
                                        waiting_.timeout);
    if (!call) return call.error();
    return std::unique_ptr<PendingCall>(std::move(call.value()));
  }

  Status do_all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    if (auto s = fits_mpi_int(send_count * static_cast<size_t>(size())); !s) return s;
    const MPI_Datatype t = mpi_type(type);
    const int n = static_cast<int>(send_count);
    const size_t my_offset = send_count * static_cast<size_t>(rank()) * element_bytes(type);
    const bool in_place = send == static_cast<const std::byte*>(recv) + my_offset;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, comm_->get(), &request)
                                 : MPI_Iallgather(send, n, t, recv, n, t, comm_->get(), &request);
    return complete(started, request, Deadline(waiting_.timeout), "MPI_Iallgather", send_count * static_cast<size_t>(size()) * element_bytes(type));
  }

  Status do_broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    if (rank() == root && send != recv) std::memcpy(recv, send, count * element_bytes(type));
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Ibcast(recv, static_cast<int>(count), mpi_type(type), root, comm_->get(), &request);
    return complete(started, request, Deadline(waiting_.timeout), "MPI_Ibcast", count * element_bytes(type));
  }

  Status do_send(const void* send, size_t count, DataType type, int peer, int tag) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Isend(send, static_cast<int>(count), mpi_type(type), peer, tag, comm_->get(), &request);
    return complete(started, request, Deadline(waiting_.timeout), "MPI_Isend", count * element_bytes(type));
  }

  Result<std::unique_ptr<PendingCall>> do_start_send(const void* send, size_t count, DataType type, int peer, int tag) override {
    if (auto s = fits_mpi_int(count); !s) return s.error();
    auto call = std::make_unique<PendingSend>(comm_, waiting_, count * element_bytes(type));
    if (auto s = mpi_status(MPI_Isend(send, static_cast<int>(count), mpi_type(type), peer, tag, comm_->get(), &call->request), "MPI_Isend"); !s) {
      return s.error();
    }
    return std::unique_ptr<PendingCall>(std::move(call));
  }

  Status do_recv(void* recv, size_t count, DataType type, int peer, int tag) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    MPI_Status status;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Irecv(recv, static_cast<int>(count), mpi_type(type), peer, tag, comm_->get(), &request);
    // A longer message fails here with MPI_ERR_TRUNCATE (MPI-3.1 §3.2.4).
    if (auto s = complete(started, request, Deadline(waiting_.timeout), "MPI_Irecv", count * element_bytes(type), nullptr, &status); !s) return s;
    return check_received(status, type, count, peer);
  }

  Result<std::unique_ptr<PendingCall>> do_start_recv(void* recv, size_t count, DataType type, int peer, int tag) override {
    if (auto s = fits_mpi_int(count); !s) return s.error();
    auto call = std::make_unique<PendingRecv>(comm_, waiting_, type, count, peer);
    if (auto s = mpi_status(MPI_Irecv(recv, static_cast<int>(count), mpi_type(type), peer, tag, comm_->get(), &call->request), "MPI_Irecv"); !s) {
      return s.error();
    }
    return std::unique_ptr<PendingCall>(std::move(call));
  }

  Status do_barrier() override {
    MPI_Request request = MPI_REQUEST_NULL;
    return complete(MPI_Ibarrier(comm_->get(), &request), request, Deadline(waiting_.timeout), "MPI_Ibarrier", 0);
  }

  // MPI_Comm_split has no nonblocking form (MPI-3.1 §6.4.2), so the ranks first
  // meet in a barrier that can time out; past it, every rank has arrived.
  Result<std::unique_ptr<Communicator>> do_split(int color, int key, std::string name) override {
    if (auto s = do_barrier(); !s) return s.error();
    MPI_Comm group = MPI_COMM_NULL;
    if (auto s = mpi_status(MPI_Comm_split(comm_->get(), color, key, &group), "MPI_Comm_split"); !s) return s.error();
    return adopt(runtime_, MpiCommHandle(group), std::move(name), waiting_);
  }

  // Declared first so that it is destroyed last: MPI stays up until comm_ is
  // freed. comm_ is shared with the calls that timed out on it, which MPI may
  // still progress.
  std::shared_ptr<const MpiRuntime> runtime_;
  std::shared_ptr<const MpiCommHandle> comm_;
  std::shared_ptr<const MpiCommHandle> gather_comm_;
  Waiting waiting_;
};

}  // namespace

Result<std::shared_ptr<MpiRuntime>> MpiRuntime::start() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized || finalized) {
    return make_error(ErrorCode::invalid_argument, "MPI is already initialised in this process; start one MpiRuntime and share it");
  }
  int provided = MPI_THREAD_SINGLE;
  if (auto s = mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread"); !s) return s.error();
  // From here on failures return codes; the runtime below finalises MPI if a
  // later step fails.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  const Status rank_status = mpi_status(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  const Status size_status = mpi_status(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  std::shared_ptr<MpiRuntime> runtime(new MpiRuntime(rank, size));
  if (!rank_status) return rank_status.error();
  if (!size_status) return size_status.error();
  if (provided < MPI_THREAD_FUNNELED) {
    return make_error(ErrorCode::unsupported, "this MPI library provides no thread support (MPI_THREAD_SINGLE); the engine needs MPI_THREAD_FUNNELED");
  }
  return runtime;
}

MpiRuntime::MpiRuntime(int world_rank, int world_size)
    : world_rank_(world_rank), world_size_(world_size), abandoned_(std::make_shared<AbandonedCalls>()) {}

MpiRuntime::~MpiRuntime() {
  if (abandoned_->all_completed()) {
    abandoned_.reset();  // their communicators are freed while MPI is up
    MPI_Finalize();
    return;
  }
  // MPI_Finalize needs this rank's calls complete and waits for the other
  // ranks (MPI-3.1 §8.7): after a call that timed out and is still pending it
  // would hang. Nor may what the pending calls use be freed (their
  // communicators, buffers), as MPI would still reach it. Both are left to the
  // process's end, which follows: the launcher then ends the job (mpi.h).
  static_cast<void>(new std::shared_ptr<AbandonedCalls>(std::move(abandoned_)));
}

Result<std::unique_ptr<Communicator>> MpiRuntime::world(std::chrono::duration<double> timeout) {
  if (auto s = positive_timeout(timeout); !s) return s.error();
  auto copy = duplicate(MPI_COMM_WORLD, Deadline(timeout), *abandoned_);
  if (!copy) {
    return make_error(ErrorCode::comm_error, "making 'world' (world rank " + std::to_string(world_rank_) + " of " + std::to_string(world_size_) +
                                                 "): " + copy.error().message);
  }
  return MpiCommunicator::adopt(shared_from_this(), std::move(copy.value()), "world", Waiting{timeout, abandoned_});
}

}  // namespace tessera::engine::comm
