#include "tessera/engine/cuda/stream_events.h"

#include <stdexcept>
#include <string>

namespace tessera::engine::cuda {
namespace {

cudaEvent_t as_event(EventSource::Event event) { return reinterpret_cast<cudaEvent_t>(event); }

void check(cudaError_t code, const char* call) {
  if (code != cudaSuccess) throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorString(code));
}

}  // namespace

EventSource::Event CudaEvents::record(StreamId stream) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (const cudaError_t recorded = cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)); recorded != cudaSuccess) {
    cudaEventDestroy(event);
    check(recorded, "cudaEventRecord");
  }
  return reinterpret_cast<Event>(event);
}

bool CudaEvents::completed(Event event) {
  const cudaError_t state = cudaEventQuery(as_event(event));
  if (state == cudaErrorNotReady) return false;
  check(state, "cudaEventQuery");
  return true;
}

void CudaEvents::synchronize(Event event) { check(cudaEventSynchronize(as_event(event)), "cudaEventSynchronize"); }

void CudaEvents::destroy(Event event) { cudaEventDestroy(as_event(event)); }

}  // namespace tessera::engine::cuda
