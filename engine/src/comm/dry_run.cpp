#include "tessera/engine/comm/dry_run.h"

#include <string>
#include <utility>

namespace tessera::engine::comm {
namespace {

class DryRunCommunicator final : public Communicator {
 public:
  DryRunCommunicator(int rank, int size, std::string name) : Communicator(rank, size, rank, std::move(name)) {}

 private:
  static Status refused() { return make_error(ErrorCode::comm_error, "a dry run does not communicate"); }
  Status do_all_reduce(const void*, void*, size_t, DataType, ReduceOp) override { return refused(); }
  Status do_reduce_scatter(const void*, void*, size_t, DataType, ReduceOp) override { return refused(); }
  Status do_all_gather(const void*, void*, size_t, DataType) override { return refused(); }
  Status do_broadcast(const void*, void*, size_t, DataType, int) override { return refused(); }
  Status do_send(const void*, size_t, DataType, int, int) override { return refused(); }
  Status do_recv(void*, size_t, DataType, int, int) override { return refused(); }
  Status do_barrier() override { return refused(); }
  Result<std::unique_ptr<Communicator>> do_split(int, int, std::string name) override {
    return std::unique_ptr<Communicator>(std::make_unique<DryRunCommunicator>(rank(), size(), std::move(name)));
  }
};

}  // namespace

std::unique_ptr<Communicator> make_dry_run_communicator(int rank, int size) {
  return std::make_unique<DryRunCommunicator>(rank, size, "world");
}

}  // namespace tessera::engine::comm
