#include "tessera/engine/device/stream_events.h"

#include <algorithm>

namespace tessera::engine {

PendingFrees::~PendingFrees() { take_all(); }

bool PendingFrees::defer(uintptr_t memory, std::set<StreamId>& streams) {
  if (streams.empty()) return false;
  Pending pending{memory, {}};
  for (StreamId stream : streams) pending.events.push_back(events_.record(stream));
  pending_.push_back(std::move(pending));
  streams.clear();
  return true;
}

std::vector<uintptr_t> PendingFrees::take_completed() {
  std::vector<uintptr_t> done;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!std::all_of(it->events.begin(), it->events.end(), [&](EventSource::Event e) { return events_.completed(e); })) {
      ++it;
      continue;
    }
    for (EventSource::Event e : it->events) events_.destroy(e);
    done.push_back(it->memory);
    it = pending_.erase(it);
  }
  return done;
}

std::vector<uintptr_t> PendingFrees::take_all() {
  for (const Pending& pending : pending_) {
    for (EventSource::Event e : pending.events) events_.synchronize(e);
  }
  return take_completed();
}

}  // namespace tessera::engine
