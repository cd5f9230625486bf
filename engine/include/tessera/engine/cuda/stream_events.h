// CUDA events for the caching allocators (device/stream_events.h): streams
// are cudaStream_t values, events cudaEvent_t made without timing
// (cudaEventDisableTiming, the cheapest kind, as PyTorch's allocators make them).
#pragma once

#include <cuda_runtime_api.h>

#include "tessera/engine/device/stream_events.h"

namespace tessera::engine::cuda {

inline StreamId stream_id(cudaStream_t stream) { return reinterpret_cast<StreamId>(stream); }

class CudaEvents final : public EventSource {
 public:
  // A failure to make or record an event throws std::runtime_error naming the
  // CUDA error: the allocator cannot tell when the memory is free otherwise.
  Event record(StreamId stream) override;
  // A query that fails (other than not ready) also throws.
  bool completed(Event event) override;
  void synchronize(Event event) override;
  void destroy(Event event) override;
};

}  // namespace tessera::engine::cuda
