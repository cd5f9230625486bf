// Owner of one MPI_Comm that MPI made for us (MPI_Comm_idup, MPI_Comm_split):
// MPI_Comm_free when the owner goes. Move-only, so each handle is freed once.
// Private to the MPI backend; the runtime that outlives it is mpi.h's MpiRuntime.
#pragma once

#include <mpi.h>

#include <utility>

namespace tessera::engine::comm {

class MpiCommHandle {
 public:
  MpiCommHandle() = default;
  explicit MpiCommHandle(MPI_Comm comm) : comm_(comm) {}
  MpiCommHandle(MpiCommHandle&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  MpiCommHandle& operator=(MpiCommHandle&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  MpiCommHandle(const MpiCommHandle&) = delete;
  MpiCommHandle& operator=(const MpiCommHandle&) = delete;
  ~MpiCommHandle() { reset(); }

  MPI_Comm get() const { return comm_; }

 private:
  // A failure to free is ignored: a destructor cannot report it, and the
  // handle is gone from our side either way.
  void reset() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace tessera::engine::comm
