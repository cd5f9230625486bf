// The one-rank communicator: a group of size 1, which the one-rank engine runs
// on (no MPI needed). Every collective is a copy, or nothing when in place:
// the reduction of one operand is that operand; broadcast's only root is 0;
// send and recv have no peer and are refused by Communicator's checks. Bytes
// are counted as on any backend (comm_types.h), so counters do not depend on
// how many ranks a run has.
#pragma once

#include <memory>
#include <string>

#include "tessera/engine/comm/communicator.h"

namespace tessera::engine::comm {

std::unique_ptr<Communicator> make_local_communicator(std::string name = "world");

}  // namespace tessera::engine::comm
