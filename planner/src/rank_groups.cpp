#include "tessera/planner/rank_groups.h"

#include "tessera/planner/status.h"

namespace tessera::planner {
namespace {

// The axes from fastest to slowest and their sizes.
constexpr std::array<MeshAxis, 4> kOrder = {MeshAxis::tensor, MeshAxis::context, MeshAxis::data, MeshAxis::pipeline};

int64_t axis_size(const ParallelLayout& l, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::tensor: return l.tp;
    case MeshAxis::context: return l.cp;
    case MeshAxis::data: return l.dp;
    case MeshAxis::pipeline: return l.pp;
  }
  return 1;
}

int64_t& coordinate(RankCoordinates& c, MeshAxis axis) {
  switch (axis) {
    case MeshAxis::tensor: return c.tp_rank;
    case MeshAxis::context: return c.cp_rank;
    case MeshAxis::data: return c.dp_rank;
    case MeshAxis::pipeline: break;
  }
  return c.pp_rank;
}

// The mixed-radix number of the coordinates in kOrder, leaving out `skipped`.
int64_t mixed_radix(const ParallelLayout& l, RankCoordinates c, MeshAxis skipped) {
  int64_t value = 0, scale = 1;
  for (MeshAxis axis : kOrder) {
    if (axis == skipped) continue;
    value += coordinate(c, axis) * scale;
    scale *= axis_size(l, axis);
  }
  return value;
}

constexpr MeshAxis kNone = static_cast<MeshAxis>(-1);

}  // namespace

RankCoordinates rank_coordinates(const ParallelLayout& l, int64_t rank) {
  TESSERA_CHECK(rank >= 0 && rank < l.world_size(), "rank outside the layout");
  RankCoordinates c;
  for (MeshAxis axis : kOrder) {
    coordinate(c, axis) = rank % axis_size(l, axis);
    rank /= axis_size(l, axis);
  }
  return c;
}

int64_t group_index(const ParallelLayout& l, int64_t rank, MeshAxis axis) {
  // A group is fixed by the coordinates it does not vary; its lowest rank has
  // the varied one at 0, and these indices count groups in that order.
  return mixed_radix(l, rank_coordinates(l, rank), axis);
}

std::vector<int64_t> group_members(const ParallelLayout& l, int64_t rank, MeshAxis axis) {
  const RankCoordinates c = rank_coordinates(l, rank);
  const int64_t size = axis_size(l, axis);
  std::vector<int64_t> members;
  members.reserve(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    RankCoordinates member = c;
    coordinate(member, axis) = i;
    members.push_back(mixed_radix(l, member, kNone));
  }
  return members;
}

int64_t data_context_group_index(const ParallelLayout& l, int64_t rank) {
  const RankCoordinates c = rank_coordinates(l, rank);
  return c.tp_rank + l.tp * c.pp_rank;  // the coordinates the group does not vary, in kOrder
}

int64_t data_context_rank(const ParallelLayout& l, int64_t rank) {
  const RankCoordinates c = rank_coordinates(l, rank);
  return c.cp_rank + l.cp * c.dp_rank;  // the coordinates it varies, in kOrder
}

}  // namespace tessera::planner
