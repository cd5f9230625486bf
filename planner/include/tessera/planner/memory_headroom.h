// --memory-headroom (the CLI) and the window's Memory headroom: what every GPU
// must leave free, as GiB ("2", "1.5") or a percentage of its memory ("10%"),
// into the assumptions the memory model checks each rank against.
#pragma once

#include <string>

#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Anything but a plain non-negative number of GiB below 2^20, or a percentage
// below 100, is refused naming --memory-headroom and the forms it takes.
Status parse_memory_headroom(const std::string& text, Assumptions& assumptions);

}  // namespace tessera::planner
