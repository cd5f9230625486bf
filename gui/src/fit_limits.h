// What the input sliders mark: the largest sequence length and global batch,
// each a power of two as the sliders offer them, at which the plan in view
// still fits, with the other inputs as they are. The plan is carried to each
// value as a what-if change carries it (planner::carry_plan).
#pragma once

#include <bit>
#include <cstdint>

#include "tessera/planner/model.h"
#include "tessera/planner/search.h"

namespace tessera::gui {

// A slider over 2^low .. 2^high.
struct PowerOfTwoRange {
  int low = 0, high = 0;
};
inline constexpr PowerOfTwoRange kSeqSliderRange{7, std::bit_width(static_cast<uint64_t>(planner::kMaxSeqLen)) - 1};
inline constexpr PowerOfTwoRange kBatchSliderRange{0, std::bit_width(static_cast<uint64_t>(planner::kMaxGlobalBatchSize)) - 1};

struct FitLimits {
  int64_t seq_len = 0;       // 0: the plan fits at no sequence length the slider offers
  int64_t global_batch = 0;  // 0: at no global batch the slider offers
  // Whether the next power of two is over memory. Otherwise the limit is where the
  // plan (or the slider) ends: the model's positions, the most micro-batches a plan
  // may have, the slider's last value; the plan fits at every value it can take.
  bool seq_len_bounded_by_memory = false;
  bool global_batch_bounded_by_memory = false;
  bool operator==(const FitLimits&) const = default;
};

// Memory grows with the sequence and (once the batch splits over the data-parallel
// ranks at all) with the batch, so each limit is a binary search: a few estimates.
FitLimits fit_limits(const planner::Model& model, const planner::PlanRequest& request, const planner::EstimateRequest& plan);

}  // namespace tessera::gui
