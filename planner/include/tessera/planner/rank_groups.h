// Which data-, tensor-, context- and pipeline-parallel group each rank belongs
// to, for a layout's rank order (training_config.h: tensor-parallel fastest,
// then context, data and pipeline: rank = tp_rank + tp · (cp_rank + cp ·
// (dp_rank + dp · pp_rank))). With cp 1 the context coordinate vanishes.
//
// Worked example, dp 2 × tp 4 × pp 2 = 16 ranks:
//   tensor groups   (same dp and pp rank):  {0,1,2,3} {4,5,6,7} {8,9,10,11} {12,13,14,15}
//   data groups     (same tp and pp rank):  {0,4} {1,5} {2,6} {3,7} {8,12} {9,13} {10,14} {11,15}
//   pipeline groups (same tp and dp rank):  {0,8} {1,9} {2,10} {3,11} {4,12} {5,13} {6,14} {7,15}
// so rank 6 is tp rank 2, dp rank 1, pp rank 0, and talks to ranks 4-7 (tensor),
// 2 (data) and 14 (pipeline).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/planner/enum_names.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

enum class MeshAxis { data, tensor, pipeline, context };
inline constexpr std::array<EnumName<MeshAxis>, 4> kMeshAxisNames{
    {{MeshAxis::data, "data"}, {MeshAxis::tensor, "tensor"}, {MeshAxis::pipeline, "pipeline"}, {MeshAxis::context, "context"}}};
inline std::span<const EnumName<MeshAxis>> enum_names(MeshAxis) { return kMeshAxisNames; }

struct RankCoordinates {
  int64_t tp_rank = 0;
  int64_t dp_rank = 0;
  int64_t pp_rank = 0;  // the pipeline stage
  int64_t cp_rank = 0;  // which part of each sequence (context parallelism)
};

// Needs 0 <= rank < layout.world_size().
RankCoordinates rank_coordinates(const ParallelLayout& layout, int64_t rank);

// Which group of `axis` the rank is in, numbered 0.. in order of the group's lowest rank.
int64_t group_index(const ParallelLayout& layout, int64_t rank, MeshAxis axis);

// The ranks of that group, ascending (the rank itself included).
std::vector<int64_t> group_members(const ParallelLayout& layout, int64_t rank, MeshAxis axis);

// The group that reduces the rank's gradients: its data- and context-parallel
// ranks together (same tp and pp rank; ParallelLayout::data_ranks(),
// Megatron-Core's data-parallel group with context parallelism), numbered as
// group_index numbers groups.
int64_t data_context_group_index(const ParallelLayout& layout, int64_t rank);
// The rank's place in that group: cp_rank + cp · dp_rank (its members ascend so).
int64_t data_context_rank(const ParallelLayout& layout, int64_t rank);

}  // namespace tessera::planner
