// The job tests/comm/mpi_timeout.sh runs under `mpirun -np 4`: every rank
// all-reduces in a loop with a short communication timeout, and rank 1 fails at
// iteration 20:
//   tessera_mpi_timeout_job killed <timeout s> <tag>   rank 1 SIGKILLs itself
//   tessera_mpi_timeout_job stuck <timeout s> <tag>    rank 1 stops calling (sleeps)
// <tag> is not used: it marks the processes of one run for the script's pgrep.
// A rank whose call fails prints the error, one line, and exits 1; rank 1 when
// stuck exits 3 after 60 s (the script requires the launcher to end it sooner);
// a job that completes every iteration exits 0, which the script counts as a failure.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tessera/engine/comm/mpi.h"

namespace tessera::engine::comm {
namespace {

constexpr int kIterations = 1000;
constexpr int kFailingRank = 1;
constexpr int kFailAt = 20;

int run(MpiRuntime& runtime, bool killed, double timeout_seconds) {
  auto world = runtime.world(std::chrono::duration<double>(timeout_seconds));
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.error().message.c_str());
    return 1;
  }
  Communicator& group = **world;
  std::vector<float> gradients(1000, 1.0f);
  for (int i = 0; i < kIterations; ++i) {
    if (group.rank() == kFailingRank && i == kFailAt) {
      if (killed) std::raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 3;
    }
    if (const Status s = group.all_reduce(gradients.data(), gradients.data(), gradients.size(), ReduceOp::max); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera::engine::comm

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "killed") != 0 && std::strcmp(argv[1], "stuck") != 0)) {
    std::fprintf(stderr, "usage: tessera_mpi_timeout_job killed|stuck <timeout seconds> <tag>\n");
    return 2;
  }
  auto runtime = tessera::engine::comm::MpiRuntime::start();
  if (!runtime.ok()) {
    std::fprintf(stderr, "tessera_mpi_timeout_job: %s\n", runtime.error().message.c_str());
    return 1;
  }
  return tessera::engine::comm::run(**runtime, std::strcmp(argv[1], "killed") == 0, std::atof(argv[2]));
}
