#include "tessera/planner/cpu_backend.h"

#include <unistd.h>

namespace tessera::planner {

GpuProfile host_cpu_profile() {
  GpuProfile cpu;
  cpu.name = "cpu";
  cpu.display_name = "host CPU";
  cpu.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  cpu.usable_memory_bytes = cpu.memory_bytes;
  // Placeholders of a few-core machine: 2 cores × 3 GHz × 16 fp32 FMAs, dual-channel DRAM,
  // ranks exchanging through shared memory. Enough for a finite step, not for a measurement.
  cpu.peak_tflops = PeakTflops{0.1, 0.1, 0.1, 0.1};
  cpu.hbm_gbps = 20;
  cpu.pcie_gbps = 10;
  return cpu;
}

}  // namespace tessera::planner
