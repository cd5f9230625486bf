// Which CUDA device each rank uses (device/rank_device.h): the launcher's
// local rank, and one line when a machine has more ranks than devices.
#include "tessera/engine/device/rank_device.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tessera::engine {
namespace {

// An environment of the given variables only.
std::function<const char*(const char*)> environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    const auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

TEST(RankDevice, LocalRankFromTheLauncher) {
  // Open MPI: world rank 5 of 8 on 2 machines of 4 is local rank 1 of 4.
  const LocalRank ompi = local_rank_of(5, 8, environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  EXPECT_EQ(ompi.rank, 1);
  EXPECT_EQ(ompi.size, 4);
  const LocalRank mpich = local_rank_of(5, 8, environment({{"MPI_LOCALRANKID", "3"}, {"MPI_LOCALNRANKS", "4"}}));
  EXPECT_EQ(mpich.rank, 3);
  EXPECT_EQ(mpich.size, 4);
  // Without a launcher's variables (or with broken ones) every rank is on one machine.
  for (const auto& env : {environment({}), environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
                          environment({{"OMPI_COMM_WORLD_LOCAL_RANK", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}})}) {
    const LocalRank alone = local_rank_of(2, 3, env);
    EXPECT_EQ(alone.rank, 2);
    EXPECT_EQ(alone.size, 3);
  }
}

TEST(RankDevice, OneRankPerDevice) {
  EXPECT_EQ(device_of_local_rank(LocalRank{0, 1}, 1).value(), 0);
  EXPECT_EQ(device_of_local_rank(LocalRank{1, 2}, 8).value(), 1);
  EXPECT_EQ(device_of_local_rank(LocalRank{3, 4}, 4).value(), 3);
}

// More ranks than devices: every rank of the machine refuses, the first included.
TEST(RankDevice, MoreRanksThanDevicesIsOneLine) {
  for (int rank : {0, 3}) {
    auto refused = device_of_local_rank(LocalRank{rank, 4}, 2);
    ASSERT_FALSE(refused.ok()) << rank;
    EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
    EXPECT_EQ(refused.error().message, "local rank " + std::to_string(rank) +
                                           " of 4: 4 ranks on this machine but 2 visible CUDA devices (one rank per GPU); launch at most 2 ranks per machine "
                                           "(mpirun -np 2, or --map-by ppr:2:node) or make more GPUs visible (CUDA_VISIBLE_DEVICES)");
  }
  EXPECT_NE(device_of_local_rank(LocalRank{0, 2}, 1).error().message.find("but 1 visible CUDA device (one"), std::string::npos);
}

}  // namespace
}  // namespace tessera::engine
