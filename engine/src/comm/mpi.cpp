// The MPI backend (mpi.h says what it guarantees and why it reduces by itself).
#include "tessera/engine/comm/mpi.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "mpi_comm_handle.h"
#include "tessera/engine/comm/ordered_reduce.h"

namespace tessera::engine::comm {
namespace {

// Point-to-point messages of this backend use one tag: collectives never match
// point-to-point messages (MPI-3.1 §5.1), and pairs stay ordered (§3.5).
constexpr int kTag = 0;

Status mpi_status(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::success();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = std::snprintf(text, sizeof text, "MPI error %d", code);
  return make_error(ErrorCode::comm_error, std::string(call) + " failed: " + std::string(text, static_cast<size_t>(length)));
}

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

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<const MpiRuntime> runtime, MpiCommHandle comm, int rank, int size, std::string name)
      : Communicator(rank, size, runtime->world_rank(), std::move(name)), runtime_(std::move(runtime)), comm_(std::move(comm)) {}

  // A communicator over `comm` (just made by MPI_Comm_dup or MPI_Comm_split),
  // which from here on returns its errors.
  static Result<std::unique_ptr<Communicator>> adopt(std::shared_ptr<const MpiRuntime> runtime, MpiCommHandle comm, std::string name) {
    if (auto s = mpi_status(MPI_Comm_set_errhandler(comm.get(), MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"); !s) return s.error();
    int rank = 0, size = 0;
    if (auto s = mpi_status(MPI_Comm_rank(comm.get(), &rank), "MPI_Comm_rank"); !s) return s.error();
    if (auto s = mpi_status(MPI_Comm_size(comm.get(), &size), "MPI_Comm_size"); !s) return s.error();
    return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(std::move(runtime), std::move(comm), rank, size, std::move(name)));
  }

 private:
  // Reduces chunk rank() of `send` (laid out as `chunks`) over all ranks into
  // `out`, in rank order: MPI_Alltoallv gathers every rank's copy of the chunk
  // into a scratch buffer (size(), mine) and reduce_in_rank_order combines them.
  Status reduce_my_chunk(const void* send, void* out, const Chunks& chunks, DataType type, ReduceOp op) {
    const int n = size();
    const auto mine = static_cast<size_t>(chunks.counts[static_cast<size_t>(rank())]);
    std::unique_ptr<std::byte[]> scratch;
    const size_t scratch_bytes = mine * static_cast<size_t>(n) * element_bytes(type);
    try {
      scratch = std::make_unique_for_overwrite<std::byte[]>(scratch_bytes);
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::invalid_argument, "out of memory allocating " + std::to_string(scratch_bytes) + " bytes of reduction scratch (comm_buffers)");
    }
    const std::vector<int> recv_counts(static_cast<size_t>(n), static_cast<int>(mine));
    std::vector<int> recv_offsets(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) recv_offsets[static_cast<size_t>(r)] = static_cast<int>(mine) * r;
    const MPI_Datatype t = mpi_type(type);
    if (auto s = mpi_status(MPI_Alltoallv(send, chunks.counts.data(), chunks.offsets.data(), t, scratch.get(), recv_counts.data(),
                                          recv_offsets.data(), t, comm_.get()),
                            "MPI_Alltoallv");
        !s) {
      return s;
    }
    reduce_in_rank_order(out, scratch.get(), n, mine, type, op);
    return Status::success();
  }

  Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    const Chunks chunks = balanced_chunks(count, size());
    const size_t my_offset = static_cast<size_t>(chunks.offsets[static_cast<size_t>(rank())]) * element_bytes(type);
    // In place is safe: MPI_Alltoallv has read all of `send` before the reduced
    // chunk is written over it.
    if (auto s = reduce_my_chunk(send, static_cast<std::byte*>(recv) + my_offset, chunks, type, op); !s) return s;
    return mpi_status(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, chunks.counts.data(), chunks.offsets.data(), mpi_type(type), comm_.get()),
                      "MPI_Allgatherv");
  }

  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) override {
    if (auto s = fits_mpi_int(recv_count * static_cast<size_t>(size())); !s) return s;
    return reduce_my_chunk(send, recv, equal_chunks(recv_count, size()), type, op);
  }

  Status do_all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    if (auto s = fits_mpi_int(send_count * static_cast<size_t>(size())); !s) return s;
    const MPI_Datatype t = mpi_type(type);
    const int n = static_cast<int>(send_count);
    const size_t my_offset = send_count * static_cast<size_t>(rank()) * element_bytes(type);
    const bool in_place = send == static_cast<const std::byte*>(recv) + my_offset;
    return mpi_status(in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, comm_.get())
                               : MPI_Allgather(send, n, t, recv, n, t, comm_.get()),
                      "MPI_Allgather");
  }

  Status do_broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    if (rank() == root && send != recv) std::memcpy(recv, send, count * element_bytes(type));
    return mpi_status(MPI_Bcast(recv, static_cast<int>(count), mpi_type(type), root, comm_.get()), "MPI_Bcast");
  }

  Status do_send(const void* send, size_t count, DataType type, int peer) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    return mpi_status(MPI_Send(send, static_cast<int>(count), mpi_type(type), peer, kTag, comm_.get()), "MPI_Send");
  }

  Status do_recv(void* recv, size_t count, DataType type, int peer) override {
    if (auto s = fits_mpi_int(count); !s) return s;
    MPI_Status status;
    // A longer message fails here with MPI_ERR_TRUNCATE (MPI-3.1 §3.2.4).
    if (auto s = mpi_status(MPI_Recv(recv, static_cast<int>(count), mpi_type(type), peer, kTag, comm_.get(), &status), "MPI_Recv"); !s) return s;
    int received = 0;
    if (auto s = mpi_status(MPI_Get_count(&status, mpi_type(type), &received), "MPI_Get_count"); !s) return s;
    if (static_cast<size_t>(received) != count) {
      return make_error(ErrorCode::invalid_argument, "rank " + std::to_string(peer) + " sent " + std::to_string(received) + " elements, " +
                                                         std::to_string(count) + " were expected");
    }
    return Status::success();
  }

  Status do_barrier() override { return mpi_status(MPI_Barrier(comm_.get()), "MPI_Barrier"); }

  Result<std::unique_ptr<Communicator>> do_split(int color, int key, std::string name) override {
    MPI_Comm group = MPI_COMM_NULL;
    if (auto s = mpi_status(MPI_Comm_split(comm_.get(), color, key, &group), "MPI_Comm_split"); !s) return s.error();
    return adopt(runtime_, MpiCommHandle(group), std::move(name));
  }

  // Declared first so that it is destroyed last: MPI stays up until comm_ is freed.
  std::shared_ptr<const MpiRuntime> runtime_;
  MpiCommHandle comm_;
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

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

Result<std::unique_ptr<Communicator>> MpiRuntime::world() {
  MPI_Comm copy = MPI_COMM_NULL;
  if (auto s = mpi_status(MPI_Comm_dup(MPI_COMM_WORLD, &copy), "MPI_Comm_dup"); !s) return s.error();
  return MpiCommunicator::adopt(shared_from_this(), MpiCommHandle(copy), "world");
}

}  // namespace tessera::engine::comm
