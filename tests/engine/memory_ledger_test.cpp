#include <gtest/gtest.h>

#include "tessera/engine/memory_ledger.h"

namespace tessera::engine {
namespace {

TEST(MemoryLedger, TracksCurrentPeakAndTheBreakdownAtThePeak) {
  MemoryLedger ledger;
  ledger.allocated(MemoryCategory::parameters, Device::cpu, 100);
  ledger.allocated(MemoryCategory::activations, Device::cpu, 300);
  ledger.freed(MemoryCategory::activations, Device::cpu, 300);
  ledger.allocated(MemoryCategory::optimizer_states, Device::cpu, 200);
  EXPECT_EQ(ledger.current(MemoryCategory::activations, Device::cpu), 0);
  EXPECT_EQ(ledger.peak(MemoryCategory::activations, Device::cpu), 300);
  EXPECT_EQ(ledger.current_total(Device::cpu), 300);
  EXPECT_EQ(ledger.peak_total(Device::cpu), 400);
  const auto& at_peak = ledger.breakdown_at_peak(Device::cpu);
  EXPECT_EQ(at_peak[static_cast<size_t>(MemoryCategory::activations)], 300);
  EXPECT_EQ(at_peak[static_cast<size_t>(MemoryCategory::optimizer_states)], 0);
  EXPECT_EQ(ledger.peak_total(Device::cuda), 0);
}

TEST(MemoryLedger, FreeingMoreThanAllocatedFailsLoudly) {
  MemoryLedger ledger;
  ledger.allocated(MemoryCategory::gradients, Device::cpu, 10);
  EXPECT_THROW(ledger.freed(MemoryCategory::gradients, Device::cpu, 11), std::logic_error);
}

}  // namespace
}  // namespace tessera::engine
