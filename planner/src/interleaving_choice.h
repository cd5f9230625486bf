// Which chunk count an interleaved layout is tried at first, predicted from its
// 1F1B twin so that the search need not simulate every count (search.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::planner::search_detail {

// `counts` (interleaved_chunk_counts) ordered by their predicted pipeline
// makespans, the shortest first. Only the bubble and the
// sends on the step's critical path change with the count v (each stage runs
// the same passes, in v pieces): 1F1B's bubble of (pp − 1) passes of a stage
// shrinks to (pp − 1)/v of them (Narayanan et al. 2021, §2.2.2), while the
// first micro-batch's forward and the last one's backward cross pp·v − 1
// virtual-stage boundaries instead of pp − 1, a send each. From the 1F1B
// twin's simulated bubble B and one send's seconds d, the stage passes in the
// bubble take B − 2(pp − 1)d, and v's bubble is (B − 2(pp − 1)d)/v + 2(pp·v − 1)d.
// The sends of the steady state run under the other chunks' passes, as
// Megatron-LM overlaps them by default under interleaving (--no-overlap-p2p-
// communication turns it off; megatron/training/arguments.py at d98e8a64ddf3).
std::vector<int64_t> chunk_counts_by_predicted_bubble(std::vector<int64_t> counts, int64_t pp, double one_f_one_b_bubble_s, double send_s);

}  // namespace tessera::planner::search_detail
