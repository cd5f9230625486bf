// --memory-headroom (the CLI) and the window's Memory headroom: what every GPU
// must leave free, as GiB ("2", "1.5") or a percentage of its memory ("10%"),
// into the assumptions the memory model checks each rank against.
#pragma once

#include <string>

#include "tessera/planner/hardware.h"
#include "tessera/planner/status.h"
#include "tessera/planner/training_config.h"

namespace tessera::planner {

// Anything but a plain non-negative number of GiB below 2^20, or a percentage
// below 100, is refused naming --memory-headroom and the forms it takes.
Status parse_memory_headroom(const std::string& text, Assumptions& assumptions);

// A headroom of the whole GPU or more leaves no plan anything: refused naming both sizes.
Status check_memory_headroom(const Assumptions& assumptions, const GpuProfile& gpu);

}  // namespace tessera::planner
