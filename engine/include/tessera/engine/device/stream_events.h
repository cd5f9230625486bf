// Streams and events as the caching allocators see them, after PyTorch's
// (c10/cuda/CUDACachingAllocator.cpp, commit eb42ad6e: recordStream,
// insert_events, process_events; aten/src/ATen/core/CachingHostAllocator.h,
// commit 04456333: record_event, free, process_events). Memory a stream may
// still read or write is not handed out again until an event recorded on that
// stream, when the memory was freed, has completed.
//
// A stream is its cudaStream_t's value (0: the legacy default stream); an
// event source records and queries CUDA events on a GPU (cuda/stream_events.h)
// and is a fake in the tests, which decide when each event completes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

namespace tessera::engine {

using StreamId = uintptr_t;

class EventSource {
 public:
  using Event = uintptr_t;
  virtual ~EventSource() = default;
  // A new event recorded on `stream` now: it completes when the work queued
  // there so far has (cudaEventCreateWithFlags + cudaEventRecord).
  virtual Event record(StreamId stream) = 0;
  virtual bool completed(Event event) = 0;   // cudaEventQuery
  virtual void synchronize(Event event) = 0; // cudaEventSynchronize
  virtual void destroy(Event event) = 0;     // cudaEventDestroy
};

// Memory freed while streams may still use it: each piece waits for one event
// per such stream, recorded when it was freed (PyTorch's insert_events), and
// is handed back once all of them have completed (process_events).
class PendingFrees {
 public:
  explicit PendingFrees(EventSource& events) : events_(events) {}
  // Waits for the events still pending: the memory they guard is going away.
  ~PendingFrees();
  PendingFrees(const PendingFrees&) = delete;
  PendingFrees& operator=(const PendingFrees&) = delete;

  // Memory just freed that `streams` used: false when there are none (it is
  // free at once); else `memory` (an address) waits for an event recorded now
  // on each of them, `streams` is cleared for the memory's next user, and true.
  bool defer(uintptr_t memory, std::set<StreamId>& streams);
  // What no longer waits: every event completed, in the order freed.
  std::vector<uintptr_t> take_completed();
  // Everything, after waiting for every event (cudaEventSynchronize), as
  // PyTorch's synchronize_and_free_events does before the cache is emptied.
  std::vector<uintptr_t> take_all();
  size_t size() const { return pending_.size(); }

 private:
  struct Pending {
    uintptr_t memory;
    std::vector<EventSource::Event> events;
  };
  EventSource& events_;
  std::deque<Pending> pending_;
};

}  // namespace tessera::engine
