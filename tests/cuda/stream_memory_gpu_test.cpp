// Streams, events and pinned memory on a GPU: CUDA events as the allocators
// use them (cuda/stream_events.h), the caching allocator's record_stream with
// cudaMalloc'd segments, and pinned host blocks with asynchronous copies
// (cuda/pinned_memory.h). A stream is held back by a host function that waits
// for the test's word (cudaLaunchHostFunc), so "the other stream has not run
// yet" is certain, not a race. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device_buffer.h"
#include "tessera/engine/cuda/device_memory.h"
#include "tessera/engine/cuda/pinned_memory.h"
#include "tessera/engine/cuda/stream_events.h"
#include "tessera/engine/device/caching_allocator.h"

namespace tessera::engine::cuda::testing {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

using StreamsOnGpu = GpuTest;

TEST_F(StreamsOnGpu, AnEventCompletesOnlyWhenItsStreamHasRun) {
  CudaEvents events;
  HeldStream stream;
  stream.hold();
  const EventSource::Event event = events.record(stream_id(stream.get()));
  EXPECT_FALSE(events.completed(event));
  stream.release();
  events.synchronize(event);
  EXPECT_TRUE(events.completed(event));
  events.destroy(event);
}

TEST_F(StreamsOnGpu, ABlockAnotherStreamUsesIsReusedOnlyAfterThatStreamHasRun) {
  CudaDeviceMemory memory;
  CudaEvents events;
  MemoryLedger ledger;
  CachingAllocator allocator(memory, events, ledger);
  HeldStream compute, communication;
  const StreamId on_compute = stream_id(compute.get());
  void* bucket = allocator.allocate(MiB, MemoryCategory::gradients, on_compute);
  communication.hold();
  ASSERT_EQ(cudaMemsetAsync(bucket, 0, MiB, communication.get()), cudaSuccess);  // queued behind the hold
  allocator.record_stream(bucket, stream_id(communication.get()));
  allocator.free(bucket);
  EXPECT_EQ(allocator.pending_frees(), 1u);
  void* other = allocator.allocate(MiB, MemoryCategory::gradients, on_compute);
  EXPECT_NE(other, bucket) << "the held stream's memset has not run";
  allocator.free(other);
  communication.release();
  ASSERT_EQ(cudaStreamSynchronize(communication.get()), cudaSuccess);
  void* again = allocator.allocate(MiB, MemoryCategory::gradients, on_compute);
  EXPECT_EQ(again, bucket);
  EXPECT_EQ(allocator.pending_frees(), 0u);
  allocator.free(again);
  EXPECT_EQ(ledger.current_total(MemorySpace::device), allocator.reserved_bytes());
}

TEST_F(StreamsOnGpu, PinnedBlocksCopyToTheGpuAndBackAsynchronouslyAndWaitForTheirCopies) {
  CudaPinnedMemory pinned;
  CudaEvents events;
  MemoryLedger ledger;
  PinnedHostAllocator host(pinned, events, ledger);
  constexpr size_t n = (3 * MiB) / sizeof(float);
  auto* states = static_cast<float*>(host.allocate(n * sizeof(float), MemoryCategory::optimizer_states));
  for (size_t i = 0; i < n; ++i) states[i] = 0.5f * static_cast<float>(i);
  const std::vector<float> sent(states, states + n);
  DeviceBuffer<float> device(n);
  auto* back = static_cast<float*>(host.allocate(n * sizeof(float), MemoryCategory::optimizer_states));
  // A spare block in the free list: while the stream is held nothing may pin
  // or allocate memory, which could wait for the held stream (CUDA C++
  // Programming Guide, "Implicit Synchronization").
  host.free(host.allocate(n * sizeof(float), MemoryCategory::optimizer_states));
  HeldStream copies;
  copies.hold();
  ASSERT_EQ(copy_to_device_async(device.get(), states, n * sizeof(float), copies.get(), host), cudaSuccess);
  ASSERT_EQ(copy_to_host_async(back, device.get(), n * sizeof(float), copies.get(), host), cudaSuccess);
  host.free(states);
  EXPECT_EQ(host.pending_frees(), 1u);
  void* next = host.allocate(n * sizeof(float), MemoryCategory::optimizer_states);
  EXPECT_NE(next, states) << "the held copy has not read it yet: the spare block, not states, is handed out";
  copies.release();
  ASSERT_EQ(cudaStreamSynchronize(copies.get()), cudaSuccess);
  EXPECT_EQ(std::memcmp(back, sent.data(), n * sizeof(float)), 0) << "the round trip through the GPU";
  host.free(next);
  host.free(back);
  EXPECT_EQ(ledger.current_total(MemorySpace::host), host.reserved_bytes());
  EXPECT_EQ(host.reserved_bytes(), 3 * 4 * MiB) << "3 MiB rounds to 4 MiB: states, back and the spare";
  EXPECT_EQ(ledger.current_total(MemorySpace::device), 0);
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
