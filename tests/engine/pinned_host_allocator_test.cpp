// The pinned host allocator's bookkeeping (device/pinned_host_allocator.h)
// with fake pinned memory and fake events: power-of-two sizes, free lists,
// blocks used by copies on streams held back until those streams' events
// complete, the retry when pinning fails, and the ledger's host space, whose
// total must equal the pinned bytes held at every moment.
#include "tessera/engine/device/pinned_host_allocator.h"

#include <gtest/gtest.h>

#include <string>

#include "fake_streams.h"
#include "tessera/engine/tensor.h"

namespace tessera::engine {
namespace {

using testing::FakeEvents;
using testing::FakeMemory;

constexpr int64_t MiB = int64_t{1} << 20;
constexpr StreamId kCopy = 0x30, kOtherCopy = 0x40;

void expect_ledger_matches(const MemoryLedger& ledger, const PinnedHostAllocator& host, const FakeMemory& memory) {
  EXPECT_EQ(ledger.current_total(MemorySpace::host), host.reserved_bytes());
  EXPECT_EQ(host.reserved_bytes(), memory.used());
  EXPECT_EQ(ledger.current(MemoryCategory::runtime, MemorySpace::host), host.reserved_bytes() - host.in_use_bytes());
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0) << "pinned memory is host memory";
}

TEST(PinnedHostAllocator, SizesRoundToAPowerOfTwoAndBookTheirCategoryInHostSpace) {
  FakeMemory memory(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  host.allocate(3 * MiB, MemoryCategory::optimizer_states);  // 4 MiB
  host.allocate(1000, MemoryCategory::gradients);             // 1024
  host.allocate(1, MemoryCategory::gradients);                // 1
  EXPECT_EQ(host.reserved_bytes(), 4 * MiB + 1024 + 1);
  EXPECT_EQ(ledger.current(MemoryCategory::optimizer_states, MemorySpace::host), 4 * MiB);
  EXPECT_EQ(ledger.current(MemoryCategory::gradients, MemorySpace::host), 1025);
  expect_ledger_matches(ledger, host, memory);
}

TEST(PinnedHostAllocator, AFreedBlockServesTheNextRequestOfItsSizeWhole) {
  FakeMemory memory(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  void* a = host.allocate(3 * MiB, MemoryCategory::optimizer_states);
  host.free(a);
  EXPECT_NE(host.allocate(MiB, MemoryCategory::optimizer_states), a) << "a 1 MiB request does not take a 4 MiB block";
  EXPECT_EQ(host.allocate(4 * MiB - 5, MemoryCategory::parameters), a) << "any request rounding to 4 MiB does";
  EXPECT_EQ(memory.live(), 2u);
  expect_ledger_matches(ledger, host, memory);
}

TEST(PinnedHostAllocator, ABlockACopyUsesIsHeldUntilEveryCopyStreamHasRun) {
  FakeMemory memory(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  // Optimizer states offloaded: copied to the GPU on one stream, back on another.
  auto* states = static_cast<char*>(host.allocate(2 * MiB, MemoryCategory::optimizer_states));
  host.record_use(states + MiB, kCopy);  // a copy of its second half
  host.record_use(states, kOtherCopy);
  host.free(states);
  EXPECT_EQ(host.pending_frees(), 1u);
  EXPECT_EQ(events.live_events(), 2u) << "one event per stream";
  EXPECT_EQ(ledger.current(MemoryCategory::optimizer_states, MemorySpace::host), 0);
  expect_ledger_matches(ledger, host, memory);

  void* second = host.allocate(2 * MiB, MemoryCategory::optimizer_states);
  EXPECT_NE(second, states) << "the copies may still read it";
  host.free(second);
  events.run(kCopy);
  host.free(host.allocate(MiB, MemoryCategory::gradients));  // an allocate checks the events: one stream has not run yet
  EXPECT_EQ(host.pending_frees(), 1u);
  events.run(kOtherCopy);
  host.allocate(MiB, MemoryCategory::gradients);
  EXPECT_EQ(host.pending_frees(), 0u);
  EXPECT_EQ(events.live_events(), 0u);
  // Both 2 MiB blocks are free now; the free list hands out the one freed last.
  EXPECT_EQ(host.allocate(2 * MiB, MemoryCategory::optimizer_states), states);
  expect_ledger_matches(ledger, host, memory);
}

TEST(PinnedHostAllocator, ReleasingTheCacheKeepsBlocksStillWaitingForTheirStreams) {
  FakeMemory memory(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  void* waiting = host.allocate(MiB, MemoryCategory::optimizer_states);
  void* idle = host.allocate(MiB, MemoryCategory::optimizer_states);
  host.record_use(waiting, kCopy);
  host.free(waiting);
  host.free(idle);
  host.release_cached();
  EXPECT_EQ(memory.live(), 1u) << "the idle block goes back, the waiting one stays (PyTorch's empty_cache waits for no event)";
  EXPECT_EQ(events.synchronized(), 0);
  events.run(kCopy);
  host.release_cached();
  EXPECT_EQ(memory.live(), 0u);
  EXPECT_EQ(ledger.current_total(MemorySpace::host), 0);
  EXPECT_EQ(ledger.peak_total(MemorySpace::host), 2 * MiB);
}

TEST(PinnedHostAllocator, RefusedPinningWaitsForPendingFreesThenFailsNamingTheCategory) {
  FakeMemory memory(3 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  void* a = host.allocate(2 * MiB, MemoryCategory::optimizer_states);
  host.record_use(a, kCopy);
  host.free(a);
  EXPECT_NE(host.allocate(MiB + 1, MemoryCategory::parameters), nullptr) << "2 MiB: fits once a's copy is waited for and a given back";
  EXPECT_EQ(events.synchronized(), 1);
  EXPECT_EQ(memory.live(), 1u);
  expect_ledger_matches(ledger, host, memory);
  try {
    host.allocate(2 * MiB, MemoryCategory::optimizer_states);
    FAIL() << "the host is out of pinned memory";
  } catch (const AllocationFailure& failure) {
    EXPECT_NE(std::string(failure.what()).find("optimizer_states"), std::string::npos) << failure.what();
  }
  expect_ledger_matches(ledger, host, memory);
}

TEST(PinnedHostAllocatorDeathTest, UsesOfMemoryItDidNotHandOutAreInternalErrors) {
  FakeMemory memory(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(memory, events, ledger);
  int on_the_stack = 0;
  EXPECT_DEATH(host.record_use(&on_the_stack, kCopy), "did not hand out");
  auto* block = static_cast<char*>(host.allocate(1024, MemoryCategory::gradients));
  EXPECT_DEATH(host.record_use(block + 1024, kCopy), "did not hand out");
  host.free(block);
  EXPECT_DEATH(host.free(block), "or twice");
}

}  // namespace
}  // namespace tessera::engine
