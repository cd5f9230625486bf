#include "tessera/planner/tp_overlap_schedule.h"

#include <algorithm>

namespace tessera::planner {
namespace {

int64_t ring(int64_t rank, int64_t tp) { return ((rank % tp) + tp) % tp; }

}  // namespace

std::vector<TpOverlapStep> tp_overlap_all_gather_steps(int64_t tp, int64_t rank) {
  std::vector<TpOverlapStep> steps{TpOverlapStep{rank, -1, -1}};
  for (int64_t s = 1; s < tp; ++s) steps.push_back(TpOverlapStep{ring(rank + s, tp), ring(rank - s, tp), ring(rank + s, tp)});
  return steps;
}

std::vector<TpOverlapStep> tp_overlap_reduce_scatter_steps(int64_t tp, int64_t rank) {
  std::vector<TpOverlapStep> steps;
  for (int64_t s = 1; s < tp; ++s) steps.push_back(TpOverlapStep{ring(rank + s, tp), ring(rank + s, tp), ring(rank - s, tp)});
  steps.push_back(TpOverlapStep{rank, -1, -1});
  return steps;
}

int64_t tp_overlap_send_buffers(int64_t tp) { return std::min<int64_t>(2, tp - 1); }

}  // namespace tessera::planner
