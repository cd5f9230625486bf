// Every allocation of the engine is tagged with a memory category and a memory
// space (the planner's names, memory_categories.h: `device` is the
// accelerator's memory, `host` the CPU's, where offloaded states go; on a CPU
// machine both are RAM). The ledger keeps current and peak bytes per category
// and space, and the breakdown at the moment the space's total peaked. This is
// what makes the planner's estimate testable.
#pragma once

#include <array>
#include <cstdint>

#include "tessera/planner/memory_categories.h"

namespace tessera::engine {

inline constexpr int kNumMemorySpaces = 2;

class MemoryLedger {
 public:
  using Breakdown = std::array<int64_t, kNumMemoryCategories>;

  // A dry run's ledger: tensors booked in it take no memory and hold no data
  // (`tessera train --dry-run` replays a rank's allocations at full scale).
  static MemoryLedger dry_run() {
    MemoryLedger ledger;
    ledger.dry_run_ = true;
    return ledger;
  }
  bool is_dry_run() const { return dry_run_; }

  // A space's capacity (0: none): an allocation that would take the space
  // past it throws AllocationFailure instead of being booked, as a GPU's
  // allocator fails (`tessera train --device-memory`).
  void set_capacity(MemorySpace space, int64_t bytes) { capacity_[index(space)] = bytes; }
  int64_t capacity(MemorySpace space) const { return capacity_[index(space)]; }

  void allocated(MemoryCategory category, MemorySpace space, int64_t bytes);
  void freed(MemoryCategory category, MemorySpace space, int64_t bytes);
  // Bytes held all along that change hands, e.g. a cached block handed out
  // (runtime -> its category) or handed back (-> runtime) by a caching allocator.
  void moved(MemoryCategory from, MemoryCategory to, MemorySpace space, int64_t bytes) {
    freed(from, space, bytes);
    allocated(to, space, bytes);
  }

  int64_t current(MemoryCategory category, MemorySpace space) const { return current_[index(space)][slot(category)]; }
  int64_t peak(MemoryCategory category, MemorySpace space) const { return peak_[index(space)][slot(category)]; }
  int64_t current_total(MemorySpace space) const { return current_total_[index(space)]; }
  int64_t peak_total(MemorySpace space) const { return peak_total_[index(space)]; }
  // Bytes per category when the space's total was at its peak.
  const Breakdown& breakdown_at_peak(MemorySpace space) const { return at_peak_[index(space)]; }

 private:
  static size_t index(MemorySpace s) { return static_cast<size_t>(s); }
  static size_t slot(MemoryCategory c) { return static_cast<size_t>(c); }

  std::array<Breakdown, kNumMemorySpaces> current_{};
  std::array<Breakdown, kNumMemorySpaces> peak_{};
  std::array<Breakdown, kNumMemorySpaces> at_peak_{};
  std::array<int64_t, kNumMemorySpaces> current_total_{};
  std::array<int64_t, kNumMemorySpaces> peak_total_{};
  std::array<int64_t, kNumMemorySpaces> capacity_{};
  bool dry_run_ = false;
};

}  // namespace tessera::engine
