// Every allocation of the engine is tagged with a memory category (the
// planner's names, memory_categories.h) and a device; the ledger keeps current
// and peak bytes per category and device, and the breakdown at the moment the
// device's total peaked. This is what makes the planner's estimate testable.
#pragma once

#include <array>
#include <cstdint>

#include "tessera/planner/memory_categories.h"

namespace tessera::engine {

enum class Device { cpu, cuda };
inline constexpr int kNumDevices = 2;

class MemoryLedger {
 public:
  using Breakdown = std::array<int64_t, kNumMemoryCategories>;

  void allocated(MemoryCategory category, Device device, int64_t bytes);
  void freed(MemoryCategory category, Device device, int64_t bytes);

  int64_t current(MemoryCategory category, Device device) const { return current_[index(device)][slot(category)]; }
  int64_t peak(MemoryCategory category, Device device) const { return peak_[index(device)][slot(category)]; }
  int64_t current_total(Device device) const { return current_total_[index(device)]; }
  int64_t peak_total(Device device) const { return peak_total_[index(device)]; }
  // Bytes per category when the device's total was at its peak.
  const Breakdown& breakdown_at_peak(Device device) const { return at_peak_[index(device)]; }

 private:
  static size_t index(Device d) { return static_cast<size_t>(d); }
  static size_t slot(MemoryCategory c) { return static_cast<size_t>(c); }

  std::array<Breakdown, kNumDevices> current_{};
  std::array<Breakdown, kNumDevices> peak_{};
  std::array<Breakdown, kNumDevices> at_peak_{};
  std::array<int64_t, kNumDevices> current_total_{};
  std::array<int64_t, kNumDevices> peak_total_{};
};

}  // namespace tessera::engine
