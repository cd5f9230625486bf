// Fakes for the caching allocators' tests: memory that hands out addresses
// (never dereferenced) up to a capacity, and events that complete when the
// test says their stream has run (FakeEvents::run).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "tessera/engine/device/memory_source.h"
#include "tessera/engine/device/stream_events.h"

namespace tessera::engine::testing {

// Addresses 4 GiB apart, up to `capacity` bytes in all.
class FakeMemory final : public MemorySource {
 public:
  explicit FakeMemory(int64_t capacity) : capacity_(capacity) {}
  void* allocate(int64_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    next_ += uintptr_t{1} << 32;
    live_[next_] = bytes;
    used_ += bytes;
    return reinterpret_cast<void*>(next_);
  }
  void release(void* memory) override {
    const auto it = live_.find(reinterpret_cast<uintptr_t>(memory));
    ASSERT_NE(it, live_.end()) << "released memory it never handed out";
    used_ -= it->second;
    live_.erase(it);
  }
  int64_t used() const { return used_; }
  size_t live() const { return live_.size(); }

 private:
  int64_t capacity_, used_ = 0;
  uintptr_t next_ = 0;
  std::map<uintptr_t, int64_t> live_;
};

// An event completes when run(stream) says that its stream has run the
// work queued before it, or when it is waited for (synchronize).
class FakeEvents final : public EventSource {
 public:
  Event record(StreamId stream) override {
    events_[++next_] = Recorded{stream, false};
    return next_;
  }
  bool completed(Event event) override { return live(event).done; }
  void synchronize(Event event) override {
    live(event).done = true;
    ++synchronized_;
  }
  void destroy(Event event) override { events_.erase(event); }

  // `stream` has run everything queued on it so far.
  void run(StreamId stream) {
    for (auto& [id, event] : events_) {
      if (event.stream == stream) event.done = true;
    }
  }
  size_t live_events() const { return events_.size(); }
  int synchronized() const { return synchronized_; }

 private:
  struct Recorded {
    StreamId stream;
    bool done;
  };
  Recorded& live(Event event) {
    auto it = events_.find(event);
    EXPECT_NE(it, events_.end()) << "event used after it was destroyed";
    return it->second;
  }
  std::map<Event, Recorded> events_;
  Event next_ = 0;
  int synchronized_ = 0;
};

}  // namespace tessera::engine::testing
