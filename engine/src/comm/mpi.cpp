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
#include "tessera/engine/comm/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

// Point-to-point messages of this backend use one tag: collectives never match
// point-to-point messages (MPI-3.1 §5.1), and pairs stay ordered (§3.5).
constexpr int kTag = 0;

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

// Where each rank's chunk of an n-way split lies, in elements.
struct Chunks {
  std::vector<int> counts, offsets;
};

// Chunk r is [count · r / n, count · (r+1) / n): sizes differ by at most one.
Chunks balanced_chunks(size_t count, int n) {
  Chunks chunks{std::vector<int>(static_cast<size_t>(n)), std::vector<int>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) {
    const size_t begin = count * static_cast<size_t>(r) / static_cast<size_t>(n);
    const size_t end = count * static_cast<size_t>(r + 1) / static_cast<size_t>(n);
    chunks.offsets[static_cast<size_t>(r)] = static_cast<int>(begin);
    chunks.counts[static_cast<size_t>(r)] = static_cast<int>(end - begin);
  }
  return chunks;
}

Chunks equal_chunks(size_t chunk, int n) {
  Chunks chunks{std::vector<int>(static_cast<size_t>(n), static_cast<int>(chunk)), std::vector<int>(static_cast<size_t>(n))};
  for (int r = 0; r < n; ++r) chunks.offsets[static_cast<size_t>(r)] = static_cast<int>(chunk * static_cast<size_t>(r));
  return chunks;
}

// How long a communicator's calls may wait, and where the calls that waited too
// long go (shared by all communicators of a runtime).
struct Waiting {
  std::chrono::duration<double> timeout;
  std::shared_ptr<AbandonedCalls> abandoned;
};

// What MPI_Ialltoallv and MPI_Iallgatherv are handed besides the caller's
// buffers: MPI may use all of it until the call completes, so a call that
// times out leaves it to AbandonedCalls.
struct ChunkExchange {
  Chunks mine;          // this rank's buffer cut into one chunk per rank
  Chunks gathered;      // every rank's copy of this rank's chunk, one after another
  std::unique_ptr<std::byte[]> scratch;  // holds `gathered`
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<const MpiRuntime> runtime, std::shared_ptr<const MpiCommHandle> comm, int rank, int size, std::string name,
                  Waiting waiting)
      : Communicator(rank, size, runtime->world_rank(), std::move(name)),
        runtime_(std::move(runtime)),
        comm_(std::move(comm)),
        waiting_(std::move(waiting)) {}

  // A communicator over `comm` (just made by MPI_Comm_idup or MPI_Comm_split),
  // which from here on returns its errors.
  static Result<std::unique_ptr<Communicator>> adopt(std::shared_ptr<const MpiRuntime> runtime, MpiCommHandle comm, std::string name,
                                                     Waiting waiting) {
    if (auto s = mpi_status(MPI_Comm_set_errhandler(comm.get(), MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"); !s) return s.error();
    int rank = 0, size = 0;
    if (auto s = mpi_status(MPI_Comm_rank(comm.get(), &rank), "MPI_Comm_rank"); !s) return s.error();
    if (auto s = mpi_status(MPI_Comm_size(comm.get(), &size), "MPI_Comm_size"); !s) return s.error();
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(
        std::move(runtime), std::make_shared<const MpiCommHandle>(std::move(comm)), rank, size, std::move(name), std::move(waiting)));
  }

 private:
  // comm::complete (mpi_wait.h) for a call on this communicator, which a call
  // left pending keeps alive.
  Status complete(int started, MPI_Request& request, const Deadline& deadline, const char* mpi_call, size_t payload_bytes,
                  std::shared_ptr<const void> in_use = nullptr, MPI_Status* status = MPI_STATUS_IGNORE) {
    return comm::complete(started, request, deadline, mpi_call, payload_bytes, *waiting_.abandoned, {std::move(in_use), comm_}, status);
  }

  // Reduces chunk rank() of `send` (laid out as exchange.mine) over all ranks
  // into `out`, in rank order: MPI_Ialltoallv gathers every rank's copy of the
  // chunk into exchange.scratch (size(), mine) and reduce_in_rank_order combines them.
  Status reduce_my_chunk(const void* send, void* out, const std::shared_ptr<ChunkExchange>& exchange, DataType type, ReduceOp op,
                         const Deadline& deadline, size_t payload_bytes) {
    const int n = size();
    const auto mine = static_cast<size_t>(exchange->mine.counts[static_cast<size_t>(rank())]);
    const size_t scratch_bytes = mine * static_cast<size_t>(n) * element_bytes(type);
    try {
      exchange->scratch = std::make_unique_for_overwrite<std::byte[]>(scratch_bytes);
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::invalid_argument, "out of memory allocating " + std::to_string(scratch_bytes) + " bytes of reduction scratch (comm_buffers)");
    }
    exchange->gathered = equal_chunks(mine, n);
    const MPI_Datatype t = mpi_type(type);
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Ialltoallv(send, exchange->mine.counts.data(), exchange->mine.offsets.data(), t, exchange->scratch.get(),
                                       exchange->gathered.counts.data(), exchange->gathered.offsets.data(), t, comm_->get(), &request);
    if (auto s = complete(started, request, deadline, "MPI_Ialltoallv", payload_bytes, exchange); !s) return s;
    reduce_in_rank_order(out, exchange->scratch.get(), n, mine, type, op);
    return Status::success();
  }

  Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    const Deadline deadline(waiting_.timeout);
    const size_t payload = count * element_bytes(type);
    auto exchange = std::make_shared<ChunkExchange>();
    exchange->mine = balanced_chunks(count, size());
    const size_t my_offset = static_cast<size_t>(exchange->mine.offsets[static_cast<size_t>(rank())]) * element_bytes(type);
    // In place is safe: MPI_Ialltoallv has read all of `send` before the
    // reduced chunk is written over it.
    if (auto s = reduce_my_chunk(send, static_cast<std::byte*>(recv) + my_offset, exchange, type, op, deadline, payload); !s) return s;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, exchange->mine.counts.data(), exchange->mine.offsets.data(),
                                        mpi_type(type), comm_->get(), &request);
    return complete(started, request, deadline, "MPI_Iallgatherv", payload, exchange);
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    if (auto s = fits_mpi_int(recv_count * static_cast<size_t>(size())); !s) return s;
    auto exchange = std::make_shared<ChunkExchange>();
    exchange->mine = equal_chunks(recv_count, size());
    return reduce_my_chunk(send, recv, exchange, type, op, Deadline(waiting_.timeout), recv_count * static_cast<size_t>(size()) * element_bytes(type));
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

  Status do_send(const void* send, size_t count, DataType type, int peer) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Isend(send, static_cast<int>(count), mpi_type(type), peer, kTag, comm_->get(), &request);
    return complete(started, request, Deadline(waiting_.timeout), "MPI_Isend", count * element_bytes(type));
  }

  Status do_recv(void* recv, size_t count, DataType type, int peer) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    MPI_Status status;
    MPI_Request request = MPI_REQUEST_NULL;
    const int started = MPI_Irecv(recv, static_cast<int>(count), mpi_type(type), peer, kTag, comm_->get(), &request);
    // A longer message fails here with MPI_ERR_TRUNCATE (MPI-3.1 §3.2.4).
    if (auto s = complete(started, request, Deadline(waiting_.timeout), "MPI_Irecv", count * element_bytes(type), nullptr, &status); !s) return s;
    int received = 0;
    if (auto s = mpi_status(MPI_Get_count(&status, mpi_type(type), &received), "MPI_Get_count"); !s) return s;
    if (static_cast<size_t>(received) != count) {
      return make_error(ErrorCode::invalid_argument, "rank " + std::to_string(peer) + " sent " + std::to_string(received) + " elements, " +
                                                         std::to_string(count) + " were expected");
    }
    return Status::success();
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
  if (!(timeout.count() > 0)) {
    return make_error(ErrorCode::invalid_argument,
                      "a communication timeout of " + seconds_text(timeout) + " is not positive; give --comm-timeout a number of seconds above 0");
  }
  // The MPI_Comm that MPI_Comm_idup fills in when it completes, which may be after a timeout.
  auto copy = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  const int started = MPI_Comm_idup(MPI_COMM_WORLD, copy.get(), &request);
  const Status duplicated = complete(started, request, Deadline(timeout), "MPI_Comm_idup", 0, *abandoned_, {copy});
  if (!duplicated) {
    return make_error(ErrorCode::comm_error, "making 'world' (world rank " + std::to_string(world_rank_) + " of " + std::to_string(world_size_) +
                                                 "): " + duplicated.error().message);
  }
  return MpiCommunicator::adopt(shared_from_this(), MpiCommHandle(*copy), "world", Waiting{timeout, abandoned_});
}

}  // namespace tessera::engine::comm
