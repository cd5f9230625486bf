#include "tessera/engine/comm/local.h"

#include <cstring>
#include <utility>

namespace tessera::engine::comm {
namespace {

// Communicator has checked the arguments: buffers are non-null, disjoint or
// identical (the in-place positions coincide at rank 0), count > 0.
void copy_unless_in_place(const void* send, void* recv, size_t count, DataType type) {
  if (send != recv) std::memcpy(recv, send, count * element_bytes(type));
}

class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(std::string name) : Communicator(0, 1, 0, std::move(name)) {}

 private:
  Status do_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp) override {
    copy_unless_in_place(send, recv, count, type);
    return Status::success();
  }
  Status do_reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp) override {
    copy_unless_in_place(send, recv, recv_count, type);
    return Status::success();
  }
  Status do_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp) override {
    copy_unless_in_place(send, recv, recv_counts[0], type);
    return Status::success();
  }
  Status do_all_gather(const void* send, void* recv, size_t send_count, DataType type) override {
    copy_unless_in_place(send, recv, send_count, type);
    return Status::success();
  }
  Status do_broadcast(const void* send, void* recv, size_t count, DataType type, int) override {
    copy_unless_in_place(send, recv, count, type);
    return Status::success();
  }
  // Unreachable: a group of one has no peer, and Communicator refuses peer == rank.
  Status do_send(const void*, size_t, DataType, int, int) override {
    return make_error(ErrorCode::invalid_argument, "a one-rank group has no peer");
  }
  Status do_recv(void*, size_t, DataType, int, int) override {
    return make_error(ErrorCode::invalid_argument, "a one-rank group has no peer");
  }
  Status do_barrier() override { return Status::success(); }
  Result<std::unique_ptr<Communicator>> do_split(int, int, std::string name) override {
    return std::unique_ptr<Communicator>(std::make_unique<LocalCommunicator>(std::move(name)));
  }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(std::string name) {
  return std::make_unique<LocalCommunicator>(std::move(name));
}

}  // namespace tessera::engine::comm
