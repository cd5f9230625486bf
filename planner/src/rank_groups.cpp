#include "tessera/planner/rank_groups.h"

#include "tessera/planner/status.h"

namespace tessera::planner {

RankCoordinates rank_coordinates(const ParallelLayout& l, int64_t rank) {
  TESSERA_CHECK(rank >= 0 && rank < l.world_size(), "rank outside the layout");
  return RankCoordinates{rank % l.tp, (rank / l.tp) % l.dp, rank / (l.tp * l.dp)};
}

namespace {

int64_t rank_of(const ParallelLayout& l, const RankCoordinates& c) { return c.tp_rank + l.tp * (c.dp_rank + l.dp * c.pp_rank); }

}  // namespace

int64_t group_index(const ParallelLayout& l, int64_t rank, MeshAxis axis) {
  const RankCoordinates c = rank_coordinates(l, rank);
  // A group is fixed by the two coordinates it does not vary; its lowest rank
  // has the varied one at 0, and these indices count groups in that order.
  switch (axis) {
    case MeshAxis::tensor: return c.dp_rank + l.dp * c.pp_rank;
    case MeshAxis::data: return c.tp_rank + l.tp * c.pp_rank;
    case MeshAxis::pipeline: return c.tp_rank + l.tp * c.dp_rank;
  }
  return 0;
}

std::vector<int64_t> group_members(const ParallelLayout& l, int64_t rank, MeshAxis axis) {
  const RankCoordinates c = rank_coordinates(l, rank);
  const int64_t size = axis == MeshAxis::tensor ? l.tp : (axis == MeshAxis::data ? l.dp : l.pp);
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    RankCoordinates member = c;
    (axis == MeshAxis::tensor ? member.tp_rank : (axis == MeshAxis::data ? member.dp_rank : member.pp_rank)) = i;
    members.push_back(rank_of(l, member));
  }
  return members;
}

}  // namespace tessera::planner
