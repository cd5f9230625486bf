// The group a dry run pretends to be one rank of: its size and rank are the
// plan's, so that every layout is computed as on the real cluster, but no call
// ever communicates. A dry run books allocations and moves no data, so a call
// reaching this backend is a bug of the dry run, reported as an error.
#pragma once

#include <memory>

#include "tessera/engine/comm/communicator.h"

namespace tessera::engine::comm {

std::unique_ptr<Communicator> make_dry_run_communicator(int rank, int size);

}  // namespace tessera::engine::comm
