#include "tessera/engine/device/rank_device.h"

#include <cstdlib>
#include <string>

namespace tessera::engine {
namespace {

// A non-negative integer, or -1 where the variable is unset or not one.
int read_count(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return *end == '\0' && value >= 0 && value < (1 << 20) ? static_cast<int>(value) : -1;
}

}  // namespace

LocalRank local_rank_of(int world_rank, int world_size, const std::function<const char*(const char*)>& getenv) {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}, {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"}};
  for (const auto& [rank_variable, size_variable] : pairs) {
    const int rank = read_count(getenv, rank_variable), size = read_count(getenv, size_variable);
    if (rank >= 0 && size > rank) return LocalRank{rank, size};
  }
  return LocalRank{world_rank, world_size};
}

Result<int> device_of_local_rank(LocalRank local, int visible_devices) {
  if (local.size <= visible_devices) return local.rank;
  const std::string ranks = std::to_string(local.size), devices = std::to_string(visible_devices);
  return make_error(ErrorCode::invalid_argument,
                    "local rank " + std::to_string(local.rank) + " of " + ranks + ": " + ranks + " ranks on this machine but " + devices +
                        " visible CUDA device" + (visible_devices == 1 ? "" : "s") + " (one rank per GPU); launch at most " + devices +
                        " ranks per machine (mpirun -np " + devices + ", or --map-by ppr:" + devices + ":node) or make more GPUs visible (CUDA_VISIBLE_DEVICES)");
}

}  // namespace tessera::engine
