#include "tessera/engine/memory_ledger.h"

#include "tessera/engine/tensor.h"
#include "tessera/planner/report.h"

#include <algorithm>
#include <stdexcept>

namespace tessera::engine {

AllocationFailure::AllocationFailure(MemoryCategory category, int64_t bytes)
    : message_("out of memory allocating " + planner::format_bytes(bytes) + " for " + std::string(to_string(category))) {}

AllocationFailure::AllocationFailure(std::string message) : message_(std::move(message)) {}

AllocationFailure AllocationFailure::over_capacity(MemorySpace space, MemoryCategory category, int64_t bytes, int64_t in_use, int64_t capacity) {
  return AllocationFailure(std::string("out of ") + (space == MemorySpace::device ? "device" : "host") + " memory allocating " + planner::format_bytes(bytes) +
                           " for " + std::string(to_string(category)) + " with " + planner::format_bytes(in_use) + " of " + planner::format_bytes(capacity) +
                           " in use (--device-memory)");
}

void MemoryLedger::allocated(MemoryCategory category, MemorySpace space, int64_t bytes) {
  const size_t d = index(space), c = slot(category);
  if (capacity_[d] > 0 && current_total_[d] + bytes > capacity_[d]) {
    throw AllocationFailure::over_capacity(space, category, bytes, current_total_[d], capacity_[d]);
  }
  current_[d][c] += bytes;
  peak_[d][c] = std::max(peak_[d][c], current_[d][c]);
  current_total_[d] += bytes;
  if (current_total_[d] > peak_total_[d]) {
    peak_total_[d] = current_total_[d];
    at_peak_[d] = current_[d];
  }
}

void MemoryLedger::freed(MemoryCategory category, MemorySpace space, int64_t bytes) {
  const size_t d = index(space), c = slot(category);
  if (bytes > current_[d][c]) throw std::logic_error("memory ledger: freeing more bytes than are allocated in a category");
  current_[d][c] -= bytes;
  current_total_[d] -= bytes;
}

}  // namespace tessera::engine
