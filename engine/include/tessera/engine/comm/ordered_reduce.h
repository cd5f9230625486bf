// The reduction every backend applies itself, so that sums do not depend on the
// order a transport happens to combine partial results in. MPI allows an
// implementation to reorder a reduction of floats and only recommends that
// repeated calls give the same result (MPI-3.1 §5.9.1, advice to implementors);
// its advice to users is to gather the operands and reduce them in the order
// wanted. Backends do that per chunk: each rank collects every rank's copy of
// one chunk, reduces it here, and the chunks are then gathered.
#pragma once

#include <cstddef>

#include "tessera/engine/comm/comm_types.h"

namespace tessera::engine::comm {

// out[k] = slice_0[k] op slice_1[k] op ... op slice_{n-1}[k], evaluated left to
// right (rank order), for k < count. `slices` holds n slices of `count`
// elements one after another ((n, count)); `out` must not overlap them.
// max: NaN if any operand is NaN, else the largest (of equal values, e.g. -0
// and +0, the lowest slice's).
void reduce_in_rank_order(void* out, const void* slices, int n, size_t count, DataType type, ReduceOp op);

}  // namespace tessera::engine::comm
