#include <gtest/gtest.h>

#include "tessera/engine/host_memory.h"
#include "tessera/engine/memory_ledger.h"
#include "tessera/engine/tensor.h"
#include "tessera/planner/report.h"

namespace tessera::engine {
namespace {

TEST(MemoryLedger, TracksCurrentPeakAndTheBreakdownAtThePeak) {
  MemoryLedger ledger;
  ledger.allocated(MemoryCategory::parameters, MemorySpace::device, 100);
  ledger.allocated(MemoryCategory::activations, MemorySpace::device, 300);
  ledger.freed(MemoryCategory::activations, MemorySpace::device, 300);
  ledger.allocated(MemoryCategory::optimizer_states, MemorySpace::device, 200);
  EXPECT_EQ(ledger.current(MemoryCategory::activations, MemorySpace::device), 0);
  EXPECT_EQ(ledger.peak(MemoryCategory::activations, MemorySpace::device), 300);
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 300);
  EXPECT_EQ(ledger.peak_total(MemorySpace::device), 400);
  const auto& at_peak = ledger.breakdown_at_peak(MemorySpace::device);
  EXPECT_EQ(at_peak[static_cast<size_t>(MemoryCategory::activations)], 300);
  EXPECT_EQ(at_peak[static_cast<size_t>(MemoryCategory::optimizer_states)], 0);
  EXPECT_EQ(ledger.peak_total(MemorySpace::host), 0);
}

TEST(MemoryLedger, FreeingMoreThanAllocatedFailsLoudly) {
  MemoryLedger ledger;
  ledger.allocated(MemoryCategory::gradients, MemorySpace::device, 10);
  EXPECT_THROW(ledger.freed(MemoryCategory::gradients, MemorySpace::device, 11), std::logic_error);
}

// An allocation that cannot be had names its category and size, and books nothing.
TEST(Tensor, AnAllocationFailureNamesWhatAndHowMuch) {
  MemoryLedger ledger;
  try {
    Tensor<float> huge(ledger, MemoryCategory::optimizer_states, int64_t{1} << 48);  // 1 PiB: beyond any address space
    FAIL() << "allocated 1 PiB";
  } catch (const AllocationFailure& e) {
    EXPECT_EQ(std::string(e.what()), "out of memory allocating " + planner::format_bytes(int64_t{4} << 48) + " for optimizer_states");
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

// --device-memory: the device space has a capacity, as a GPU has; an
// allocation past it fails naming what and how much, and books nothing (a
// tensor with a host part unbooks that too). The host space stays unbounded.
TEST(MemoryLedger, ADeviceCapacityRefusesWhatWouldPassIt) {
  MemoryLedger ledger;
  ledger.set_capacity(MemorySpace::device, 1000);
  Tensor<float> kept(ledger, MemoryCategory::parameters, 200);  // 800 bytes
  try {
    Tensor<float> split(ledger, MemoryCategory::optimizer_states, 100, HostPrefix{40});  // 160 on the host, 240 on the device
    FAIL() << "booked past the capacity";
  } catch (const AllocationFailure& e) {
    EXPECT_EQ(std::string(e.what()), "out of device memory allocating 240 B for optimizer_states with 800 B of 1000 B in use (--device-memory)");
  }
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 800);
  EXPECT_EQ(ledger.current_total(MemorySpace::host), 0);
  Tensor<float> fits(ledger, MemoryCategory::gradients, 50);  // exactly to the capacity
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 1000);
  Tensor<float> on_host(ledger, MemoryCategory::master_weights, 1000, MemorySpace::host);
  EXPECT_EQ(ledger.current_total(MemorySpace::host), 4000);
}

TEST(HostMemory, ReadsMeminfoCgroupFilesAndStatesItsReserve) {
  EXPECT_EQ(kib_field_bytes("MemTotal:       24576000 kB\nMemAvailable:   23860012 kB\n", "MemAvailable"), int64_t{23860012} * 1024);
  EXPECT_EQ(kib_field_bytes("VmSize:\t  1024 kB\n", "VmSize"), 1 << 20);
  EXPECT_FALSE(kib_field_bytes("MemTotal: 1 kB\n", "MemAvailable").has_value());
  EXPECT_EQ(cgroup_limit_bytes("8589934592\n"), int64_t{8} << 30);
  EXPECT_FALSE(cgroup_limit_bytes("max\n").has_value());                  // cgroup v2: no limit
  EXPECT_FALSE(cgroup_limit_bytes("9223372036854771712\n").has_value());  // cgroup v1: no limit
  EXPECT_EQ(memory_reserve_bytes(int64_t{1} << 30), int64_t{256} << 20);   // at least 256 MiB
  EXPECT_EQ(memory_reserve_bytes(int64_t{100} << 30), int64_t{5} << 30);   // 5% of a large limit
  const HostMemoryBudget budget = host_memory_budget();
  EXPECT_GT(budget.usable_bytes(), 0);
  EXPECT_FALSE(budget.limited_by.empty());
}

}  // namespace
}  // namespace tessera::engine
