// Rank groups against the 16-rank example worked in rank_groups.h.
#include <gtest/gtest.h>

#include "tessera/planner/rank_groups.h"

namespace tessera::planner {

TEST(RankGroups, SixteenRankExampleOfTheHeader) {
  const ParallelLayout layout{2, 4, 2, false};  // dp 2 × tp 4 × pp 2
  const RankCoordinates c = rank_coordinates(layout, 6);
  EXPECT_EQ(c.tp_rank, 2);
  EXPECT_EQ(c.dp_rank, 1);
  EXPECT_EQ(c.pp_rank, 0);
  EXPECT_EQ(group_members(layout, 6, MeshAxis::tensor), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(group_members(layout, 6, MeshAxis::data), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(group_members(layout, 6, MeshAxis::pipeline), (std::vector<int64_t>{6, 14}));
  EXPECT_EQ(group_index(layout, 6, MeshAxis::tensor), 1);
  EXPECT_EQ(group_index(layout, 6, MeshAxis::data), 2);
  EXPECT_EQ(group_index(layout, 6, MeshAxis::pipeline), 6);
  EXPECT_EQ(group_index(layout, 13, MeshAxis::data), 5);  // {9, 13}: the sixth data group
}

TEST(RankGroups, EveryRankIsInOneGroupPerAxis) {
  const ParallelLayout layout{4, 2, 3, true};
  for (MeshAxis axis : {MeshAxis::tensor, MeshAxis::data, MeshAxis::pipeline}) {
    std::vector<int> seen(static_cast<size_t>(layout.world_size()), 0);
    for (int64_t rank = 0; rank < layout.world_size(); ++rank) {
      for (int64_t member : group_members(layout, rank, axis)) {
        EXPECT_EQ(group_index(layout, member, axis), group_index(layout, rank, axis));
      }
      ++seen[static_cast<size_t>(rank)];
    }
    for (int count : seen) EXPECT_EQ(count, 1);
  }
}

}  // namespace tessera::planner
