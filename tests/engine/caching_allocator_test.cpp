// The caching allocator's bookkeeping (device/caching_allocator.h) with a
// fake device and fake events: size classes, best-fit reuse, splitting and
// merging, giving segments back, the retry after the device refuses, streams
// (pools per stream, record_stream, frees deferred until the other streams'
// events complete), and the ledger, whose device total must equal the bytes
// held from the device at every moment.
#include "tessera/engine/device/caching_allocator.h"

#include <gtest/gtest.h>


#include "fake_streams.h"
#include "tessera/engine/tensor.h"

namespace tessera::engine {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

using testing::FakeEvents;
using FakeDevice = testing::FakeMemory;

void expect_ledger_matches(const MemoryLedger& ledger, const CachingAllocator& allocator, const FakeDevice& device) {
  EXPECT_EQ(ledger.current_total(MemorySpace::device), allocator.reserved_bytes());
  EXPECT_EQ(allocator.reserved_bytes(), device.used());
  EXPECT_EQ(ledger.current(MemoryCategory::runtime, MemorySpace::device), allocator.reserved_bytes() - allocator.in_use_bytes());
}

TEST(CachingAllocator, SmallRequestsShareOneSegmentAndBookTheirCategory) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  char* a = static_cast<char*>(allocator.allocate(1, MemoryCategory::parameters));      // 512
  char* b = static_cast<char*>(allocator.allocate(1000, MemoryCategory::gradients));    // 1024
  char* c = static_cast<char*>(allocator.allocate(700 << 10, MemoryCategory::activations));  // 700 KiB, already a multiple of 512
  EXPECT_EQ(allocator.segments(), 1);
  EXPECT_EQ(allocator.reserved_bytes(), 2 * MiB);
  EXPECT_EQ(b - a, 512);  // carved one after another from the segment
  EXPECT_EQ(c - b, 1024);
  EXPECT_EQ(ledger.current(MemoryCategory::parameters, MemorySpace::device), 512);
  EXPECT_EQ(ledger.current(MemoryCategory::gradients, MemorySpace::device), 1024);
  EXPECT_EQ(ledger.current(MemoryCategory::activations, MemorySpace::device), 700 << 10);
  expect_ledger_matches(ledger, allocator, device);
  allocator.free(b);
  EXPECT_EQ(ledger.current(MemoryCategory::gradients, MemorySpace::device), 0);
  EXPECT_EQ(ledger.peak(MemoryCategory::gradients, MemorySpace::device), 1024);
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocator, FreedBlocksAreReusedBestFitWithoutTheDevice) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* small = allocator.allocate(4096, MemoryCategory::activations);
  allocator.allocate(512, MemoryCategory::activations);  // keeps small's neighbour in use: no merge
  void* medium = allocator.allocate(8192, MemoryCategory::activations);
  allocator.allocate(512, MemoryCategory::activations);
  allocator.free(small);
  allocator.free(medium);
  // 6000 bytes (6144 rounded): the 4 KiB hole is too small, the 8 KiB hole fits better than the segment's tail.
  EXPECT_EQ(allocator.allocate(6000, MemoryCategory::logits), medium);
  EXPECT_EQ(allocator.allocate(4000, MemoryCategory::logits), small);  // the exact hole, not the big tail of the segment
  EXPECT_EQ(allocator.segments(), 1);
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocator, BlocksMergeBackIntoTheirSegmentWhichCanBeGivenBack) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* a = allocator.allocate(100 << 10, MemoryCategory::activations);
  void* b = allocator.allocate(200 << 10, MemoryCategory::activations);
  void* c = allocator.allocate(300 << 10, MemoryCategory::activations);
  allocator.free(b);  // a hole between two blocks in use
  allocator.release_cached();
  EXPECT_EQ(device.live(), 1u) << "a segment with blocks in use stays";
  allocator.free(a);  // merges with b's hole
  allocator.free(c);  // merges with both, and the free tail: the whole segment again
  expect_ledger_matches(ledger, allocator, device);
  // 1 MiB from a's address: only a, b, c and the tail merged hold that much there.
  EXPECT_EQ(allocator.allocate(MiB, MemoryCategory::workspace), a);
  allocator.free(a);
  allocator.release_cached();
  EXPECT_EQ(device.live(), 0u);
  EXPECT_EQ(allocator.reserved_bytes(), 0);
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
  EXPECT_EQ(ledger.peak_total(MemorySpace::device), 2 * MiB);
}

TEST(CachingAllocator, LargeRequestsRoundTheirSegmentAndSplitOnlyLargeRemainders) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* big = allocator.allocate(5 * MiB + 1, MemoryCategory::parameters);
  EXPECT_EQ(allocator.reserved_bytes(), 6 * MiB);
  EXPECT_EQ(allocator.in_use_bytes(), 6 * MiB) << "a remainder under 1 MiB stays with the block";
  allocator.free(big);
  void* part = allocator.allocate(2 * MiB, MemoryCategory::gradients);
  EXPECT_EQ(part, big);
  EXPECT_EQ(allocator.in_use_bytes(), 2 * MiB) << "a 4 MiB remainder is split off";
  EXPECT_EQ(allocator.segments(), 1);
  void* rest = allocator.allocate(3 * MiB, MemoryCategory::gradients);
  EXPECT_EQ(static_cast<char*>(rest) - static_cast<char*>(part), 2 * MiB);
  EXPECT_EQ(allocator.segments(), 1);
  // Small requests never take from the large pool: a new 2 MiB segment.
  allocator.allocate(512, MemoryCategory::gradients);
  EXPECT_EQ(allocator.segments(), 2);
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocator, RefusedSegmentEmptiesTheCacheThenFailsNamingTheCategory) {
  FakeDevice device(6 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  allocator.free(allocator.allocate(4096, MemoryCategory::activations));  // a cached 2 MiB segment
  void* big = allocator.allocate(5 * MiB, MemoryCategory::parameters);    // 6 MiB: fits only once the cache is given back
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(allocator.segments(), 1);
  expect_ledger_matches(ledger, allocator, device);
  try {
    allocator.allocate(512, MemoryCategory::optimizer_states);
    FAIL() << "the device is full";
  } catch (const AllocationFailure& failure) {
    EXPECT_NE(std::string(failure.what()).find("optimizer_states"), std::string::npos) << failure.what();
  }
  expect_ledger_matches(ledger, allocator, device);
}

// --device-memory on a GPU: the allocator holds at most its capacity from a
// device that has more (PyTorch's set_per_process_memory_fraction); the cache
// is emptied before a request is refused, and the refusal names the capacity
// in the CPU engine's words (the ledger's, memory_ledger_test.cpp).
TEST(CachingAllocator, ACapacityBelowTheDevicesRefusesSegmentsPastIt) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger, 7 * MiB);
  EXPECT_EQ(allocator.capacity_bytes(), 7 * MiB);
  allocator.free(allocator.allocate(4096, MemoryCategory::activations));  // a cached 2 MiB segment
  void* big = allocator.allocate(5 * MiB, MemoryCategory::parameters);    // a 6 MiB segment: under 7 MiB only once the cache is given back
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(allocator.reserved_bytes(), 6 * MiB);
  expect_ledger_matches(ledger, allocator, device);
  try {
    allocator.allocate(512, MemoryCategory::gradients);  // a 2 MiB segment would make 8 MiB
    FAIL() << "allocated past the capacity";
  } catch (const AllocationFailure& failure) {
    EXPECT_EQ(std::string(failure.what()), "out of device memory allocating 512 B for gradients with 6.00 MiB of 7.00 MiB in use (--device-memory)");
  }
  EXPECT_EQ(device.used(), 6 * MiB);
  expect_ledger_matches(ledger, allocator, device);
  // At the capacity exactly, the segment is had.
  CachingAllocator exact(device, events, ledger, 2 * MiB);
  void* fits = exact.allocate(512, MemoryCategory::gradients);
  EXPECT_EQ(exact.reserved_bytes(), 2 * MiB);
  exact.free(fits);
  allocator.free(big);
}

constexpr StreamId kCompute = 0x10, kComm = 0x20;

TEST(CachingAllocatorStreams, BlocksServeOnlyTheStreamTheirSegmentWasMadeFor) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* a = allocator.allocate(4096, MemoryCategory::activations, kCompute);
  allocator.free(a);  // no other stream used it: cached at once, for kCompute
  EXPECT_EQ(allocator.pending_frees(), 0u);
  void* b = allocator.allocate(4096, MemoryCategory::gradients, kComm);
  EXPECT_NE(b, a) << "a cached block of another stream is not handed out";
  EXPECT_EQ(allocator.segments(), 2) << "kComm got a segment of its own";
  EXPECT_EQ(allocator.allocate(4096, MemoryCategory::activations, kCompute), a) << "kCompute reuses its block at once (stream order)";
  EXPECT_EQ(events.live_events(), 0u) << "no event for memory used on its own stream only";
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocatorStreams, ABlockRecordedOnAnotherStreamWaitsForThatStreamsEvent) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  // A gradient bucket written on the compute stream, all-reduced on the communication stream.
  void* bucket = allocator.allocate(MiB, MemoryCategory::gradients, kCompute);
  allocator.record_stream(bucket, kComm);
  allocator.record_stream(bucket, kCompute);  // its own stream: nothing to record
  allocator.free(bucket);
  EXPECT_EQ(allocator.pending_frees(), 1u);
  EXPECT_EQ(events.live_events(), 1u) << "one event, on the communication stream";
  EXPECT_EQ(allocator.in_use_bytes(), 0);
  EXPECT_EQ(ledger.current(MemoryCategory::gradients, MemorySpace::device), 0) << "freed for the caller at once";
  expect_ledger_matches(ledger, allocator, device);

  void* other = allocator.allocate(MiB, MemoryCategory::gradients, kCompute);
  EXPECT_NE(other, bucket) << "the all-reduce may still read the bucket";
  allocator.free(other);
  events.run(kComm);  // the all-reduce has run
  EXPECT_EQ(allocator.allocate(MiB, MemoryCategory::gradients, kCompute), bucket) << "best fit again once its event completed";
  EXPECT_EQ(allocator.pending_frees(), 0u);
  EXPECT_EQ(events.live_events(), 0u) << "completed events are destroyed";
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocatorStreams, AWaitingBlockMergesWithItsNeighboursOnlyOnceReturned) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* a = allocator.allocate(512 << 10, MemoryCategory::activations, kCompute);
  void* b = allocator.allocate(512 << 10, MemoryCategory::activations, kCompute);
  allocator.record_stream(a, kComm);
  allocator.free(a);
  allocator.free(b);  // b merges with the segment's 1 MiB tail, not with the waiting a
  EXPECT_EQ(allocator.allocate(MiB, MemoryCategory::workspace, kCompute), b) << "best fit: b and the tail (1.5 MiB), not the whole segment";
  events.run(kComm);
  EXPECT_EQ(allocator.allocate(512 << 10, MemoryCategory::activations, kCompute), a) << "a is back, the lowest of two 512 KiB holes";
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocatorStreams, EmptyingTheCacheWaitsForPendingFreesThenGivesTheirSegmentsBack) {
  FakeDevice device(4 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  void* a = allocator.allocate(2 * MiB, MemoryCategory::parameters, kCompute);
  allocator.record_stream(a, kComm);
  allocator.free(a);
  // The device is full only counting a's segment: the retry waits for kComm's event, then gives it back.
  void* big = allocator.allocate(3 * MiB, MemoryCategory::parameters, kComm);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(events.synchronized(), 1);
  EXPECT_EQ(allocator.pending_frees(), 0u);
  EXPECT_EQ(allocator.segments(), 1);
  expect_ledger_matches(ledger, allocator, device);
}

TEST(CachingAllocatorDeathTest, FreeingAForeignPointerIsAnInternalError) {
  FakeDevice device(64 * MiB);
  FakeEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(device, events, ledger);
  int on_the_stack = 0;
  EXPECT_DEATH(allocator.free(&on_the_stack), "did not hand out");
  void* waiting = allocator.allocate(512, MemoryCategory::activations, kCompute);
  allocator.record_stream(waiting, kComm);
  allocator.free(waiting);
  EXPECT_DEATH(allocator.free(waiting), "or twice");
}

}  // namespace
}  // namespace tessera::engine
