#include "tessera/planner/cpu_backend.h"

#include <unistd.h>

namespace tessera::planner {

GpuProfile host_cpu_profile() {
  GpuProfile cpu;
  cpu.name = "cpu";
  cpu.display_name = "host CPU";
  cpu.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  cpu.usable_memory_bytes = cpu.memory_bytes;
  cpu.peak_tflops = PeakTflops{1, 1, 1, 1};
  return cpu;
}

}  // namespace tessera::planner
