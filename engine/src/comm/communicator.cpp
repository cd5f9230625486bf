// The half of every call that does not depend on the backend: argument checks
// (so that no backend sees a bad root or an illegal overlap), the context added
// to errors, and the byte counters.
#include "tessera/engine/comm/communicator.h"

#include <algorithm>
#include <chrono>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace tessera::engine::comm {
namespace {

Error invalid(std::string message) { return make_error(ErrorCode::invalid_argument, std::move(message)); }

// Byte ranges compared as integers: `<` between pointers into different
// objects is unspecified in C++.
bool overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// A call's two buffers: `part` holds count elements, `whole` parts · count
// (the reduce_scatter input, the all_gather output; 1 for the others). In
// place, part == whole + in_place_index · count elements (communicator.h).
struct Buffers {
  const void* part;
  const void* whole;
  int parts;
  int in_place_index;
};

// The payload in bytes (parts · count · element bytes, as CommCounters counts
// it), or why the buffers cannot be used: too large, null, or overlapping
// other than in place.
Result<size_t> checked_payload(size_t count, DataType type, const Buffers& b) {
  const size_t unit = element_bytes(type) * static_cast<size_t>(b.parts);
  if (count > std::numeric_limits<size_t>::max() / unit) {
    return invalid("count " + std::to_string(count) + " is too large for this address space");
  }
  if (count == 0) return size_t{0};
  if (b.part == nullptr || b.whole == nullptr) return invalid("a buffer is null");
  const size_t part_bytes = count * element_bytes(type);
  const auto* in_place = static_cast<const std::byte*>(b.whole) + static_cast<size_t>(b.in_place_index) * part_bytes;
  if (b.part != in_place && overlap(b.part, part_bytes, b.whole, count * unit)) {
    return invalid("the send and recv buffers overlap but are not in place (communicator.h lists the in-place positions); make them disjoint");
  }
  return count * unit;
}

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// What a backend without nonblocking calls returns from its start: the call has run.
class CompletedCall final : public Communicator::PendingCall {
 public:
  Result<bool> test() override { return true; }
  Status wait() override { return Status::success(); }
};

std::optional<Error> peer_error(int peer, int rank, int size) {
  if (peer >= 0 && peer < size && peer != rank) return std::nullopt;
  return invalid("peer " + std::to_string(peer) + " is not another rank of this group (size " + std::to_string(size) + ")");
}

}  // namespace

Communicator::Communicator(int rank, int size, int world_rank, std::string name)
    : rank_(rank), size_(size), world_rank_(world_rank), name_(std::move(name)) {}

Error Communicator::failure(std::string_view call, const Error& what) const {
  return make_error(what.code, std::string(call) + " on '" + name_ + "' (rank " + std::to_string(rank_) + " of " +
                                   std::to_string(size_) + ", world rank " + std::to_string(world_rank_) + "): " + what.message);
}

template <typename Call>
Status Communicator::run(Collective kind, const Result<size_t>& payload, size_t count, Call call) {
  if (!started_.empty()) return refuse_while_started(enum_name(kind));
  if (!payload.ok()) return failure(enum_name(kind), payload.error());
  const auto started = std::chrono::steady_clock::now();
  if (count > 0) {
    const Status status = call();
    if (!status.ok()) return failure(enum_name(kind), status.error());
  }
  const auto finished = std::chrono::steady_clock::now();
  counters_.add(kind, static_cast<int64_t>(*payload), seconds_between(started, finished));
  record(kind, started, finished, *payload);
  return Status::success();
}

static_assert(static_cast<int>(TimelineKind::barrier) - static_cast<int>(TimelineKind::all_reduce) == static_cast<int>(Collective::barrier),
              "TimelineKind lists the collectives in Collective's order");

// A call from its start to its completion (a started one's in-flight time).
void Communicator::record(Collective kind, std::chrono::steady_clock::time_point started, std::chrono::steady_clock::time_point finished,
                          size_t payload) {
  if (timeline_ == nullptr) return;
  const auto event = static_cast<TimelineKind>(static_cast<int>(TimelineKind::all_reduce) + static_cast<int>(kind));
  timeline_->record(event, timeline_lane_, started, finished, -1, static_cast<int64_t>(payload));
}

Status Communicator::refuse_while_started(std::string_view call) const {
  return failure(call, invalid(std::to_string(started_.size()) + " started call(s) are pending; call finish_started() first"));
}

template <typename Begin>
Status Communicator::start(Collective kind, const Result<size_t>& payload, size_t count, Begin begin) {
  if (!payload.ok()) return failure(enum_name(kind), payload.error());
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<PendingCall> call;
  if (count > 0) {
    auto begun = begin();
    if (!begun.ok()) return failure(enum_name(kind), begun.error());
    call = std::move(begun.value());
  }
  started_.push_back(StartedCall{kind, *payload, std::move(call), started, seconds_between(started, std::chrono::steady_clock::now())});
  return Status::success();
}

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_all_reduce(const void* send, void* recv, size_t count, DataType type,
                                                                                     ReduceOp op) {
  if (Status s = do_all_reduce(send, recv, count, type, op); !s) return s.error();
  return std::unique_ptr<PendingCall>(std::make_unique<CompletedCall>());
}

Status Communicator::start_all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  return start(Collective::all_reduce, checked_payload(count, type, {send, recv, 1, 0}), count,
               [&] { return do_start_all_reduce(send, recv, count, type, op); });
}

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_reduce_scatter_v(const void* send, void* recv,
                                                                                           const std::vector<size_t>& recv_counts, DataType type,
                                                                                           ReduceOp op) {
  if (Status s = do_reduce_scatter_v(send, recv, recv_counts, type, op); !s) return s.error();
  return std::unique_ptr<PendingCall>(std::make_unique<CompletedCall>());
}

Status Communicator::start_reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op) {
  size_t total = 0;
  const Result<size_t> payload = checked_v_payload(send, recv, recv_counts, type, total);
  return start(Collective::reduce_scatter, payload, total, [&] { return do_start_reduce_scatter_v(send, recv, recv_counts, type, op); });
}

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_all_gather(const void* send, void* recv, size_t send_count, DataType type) {
  if (Status s = do_all_gather(send, recv, send_count, type); !s) return s.error();
  return std::unique_ptr<PendingCall>(std::make_unique<CompletedCall>());
}

Status Communicator::start_all_gather(const void* send, void* recv, size_t send_count, DataType type) {
  return start(Collective::all_gather, checked_payload(send_count, type, {send, recv, size_, rank_}), send_count,
               [&] { return do_start_all_gather(send, recv, send_count, type); });
}

void Communicator::count_oldest_started(std::chrono::steady_clock::time_point now) {
  const StartedCall& oldest = started_.front();
  counters_.add(oldest.kind, static_cast<int64_t>(oldest.payload), oldest.waited_s, seconds_between(oldest.started, now));
  record(oldest.kind, oldest.started, now, oldest.payload);
  started_.pop_front();
}

// Only the oldest call is tested: a backend may start a call's later phases
// when it is tested (MPI's all_reduce: its all-gather), and they must start in
// the same order on every rank. Testing one call also advances the others
// (MPI progresses all of a process's pending calls, MPI-3.1 §3.7.4).
Status Communicator::progress() { return complete_started(false, started_.size()); }

Status Communicator::finish_started() { return complete_started(true, started_.size()); }

Status Communicator::finish_oldest(size_t calls) { return complete_started(true, calls); }

// Counts and forgets up to `calls` started calls that have completed, oldest
// first: waiting for each (`wait`), or testing the oldest once and stopping
// at the first still pending.
Status Communicator::complete_started(bool wait, size_t calls) {
  for (; calls > 0 && !started_.empty(); --calls) {
    StartedCall& oldest = started_.front();
    const auto before = std::chrono::steady_clock::now();
    Result<bool> done = true;
    if (oldest.call && wait) {
      if (Status waited = oldest.call->wait(); !waited.ok()) done = waited.error();
    } else if (oldest.call) {
      done = oldest.call->test();
    }
    const auto after = std::chrono::steady_clock::now();
    oldest.waited_s += seconds_between(before, after);
    if (!done.ok()) {
      const Error error = failure(enum_name(oldest.kind), done.error());
      started_.clear();  // the group is unusable after a backend error (see above)
      return error;
    }
    if (!done.value()) return Status::success();
    count_oldest_started(after);
  }
  return Status::success();
}

Status Communicator::all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) {
  return run(Collective::all_reduce, checked_payload(count, type, {send, recv, 1, 0}), count,
             [&] { return do_all_reduce(send, recv, count, type, op); });
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op) {
  return run(Collective::reduce_scatter, checked_payload(recv_count, type, {recv, send, size_, rank_}), recv_count,
             [&] { return do_reduce_scatter(send, recv, recv_count, type, op); });
}

Result<size_t> Communicator::checked_v_payload(const void* send, const void* recv, const std::vector<size_t>& recv_counts, DataType type,
                                               size_t& total) const {
  if (recv_counts.size() != static_cast<size_t>(size_)) {
    return invalid(std::to_string(recv_counts.size()) + " counts for a group of " + std::to_string(size_) + " ranks");
  }
  size_t before = 0;
  total = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) before = total;
    total += recv_counts[static_cast<size_t>(r)];
  }
  // The whole input against this rank's part of it, as checked_payload does for one part.
  Result<size_t> payload = checked_payload(total, type, {send, send, 1, 0});
  const size_t mine = recv_counts[static_cast<size_t>(rank_)];
  const auto* in_place = static_cast<const std::byte*>(send) + before * element_bytes(type);
  if (payload.ok() && mine > 0 && (recv == nullptr || (recv != in_place && overlap(recv, mine * element_bytes(type), send, total * element_bytes(type))))) {
    payload = invalid("recv is null or overlaps send other than in place (send + this rank's offset); make them disjoint");
  }
  return payload;
}

Status Communicator::reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& recv_counts, DataType type, ReduceOp op) {
  size_t total = 0;
  const Result<size_t> payload = checked_v_payload(send, recv, recv_counts, type, total);
  return run(Collective::reduce_scatter, payload, total, [&] { return do_reduce_scatter_v(send, recv, recv_counts, type, op); });
}

Status Communicator::do_reduce_scatter_v(const void*, void*, const std::vector<size_t>&, DataType, ReduceOp) {
  return make_error(ErrorCode::unsupported, "this backend has no reduce_scatter with a count per rank");
}

Status Communicator::all_gather(const void* send, void* recv, size_t send_count, DataType type) {
  return run(Collective::all_gather, checked_payload(send_count, type, {send, recv, size_, rank_}), send_count,
             [&] { return do_all_gather(send, recv, send_count, type); });
}

Status Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  if (root < 0 || root >= size_) {
    return failure("broadcast", invalid("root " + std::to_string(root) + " is not a rank of this group (0.." + std::to_string(size_ - 1) + ")"));
  }
  // send is read on the root only; elsewhere it may be anything, null included.
  const void* part = rank_ == root ? send : recv;
  return run(Collective::broadcast, checked_payload(count, type, {part, recv, 1, 0}), count,
             [&] { return do_broadcast(send, recv, count, type, root); });
}

Status Communicator::send(const void* buffer, size_t count, DataType type, int peer, int tag) {
  if (auto error = peer_error(peer, rank_, size_)) return failure("send", *error);
  if (tag < 0) return failure("send", invalid("tag " + std::to_string(tag) + " is negative"));
  return run(Collective::send, checked_payload(count, type, {buffer, buffer, 1, 0}), count,
             [&] { return do_send(buffer, count, type, peer, tag); });
}

Status Communicator::recv(void* buffer, size_t count, DataType type, int peer, int tag) {
  if (auto error = peer_error(peer, rank_, size_)) return failure("recv", *error);
  if (tag < 0) return failure("recv", invalid("tag " + std::to_string(tag) + " is negative"));
  return run(Collective::recv, checked_payload(count, type, {buffer, buffer, 1, 0}), count,
             [&] { return do_recv(buffer, count, type, peer, tag); });
}

Result<size_t> Communicator::checked_send_recv_payload(const void* send_buffer, int send_peer, const void* recv_buffer, int recv_peer, size_t count,
                                                       DataType type) const {
  for (int peer : {send_peer, recv_peer}) {
    if (auto error = peer_error(peer, rank_, size_)) return *error;
  }
  const Result<size_t> payload = checked_payload(count, type, {send_buffer, send_buffer, 1, 0});
  if (!payload.ok()) return payload;
  if (const Result<size_t> into = checked_payload(count, type, {recv_buffer, recv_buffer, 1, 0}); !into.ok()) return into;
  if (count > 0 && overlap(send_buffer, *payload, recv_buffer, *payload)) return invalid("the send and recv buffers overlap; make them disjoint");
  return payload;
}

Status Communicator::send_recv(const void* send_buffer, int send_peer, void* recv_buffer, int recv_peer, size_t count, DataType type) {
  if (send_peer < 0 && recv_peer < 0) return Status::success();
  if (recv_peer < 0) return send(send_buffer, count, type, send_peer);
  if (send_peer < 0) return recv(recv_buffer, count, type, recv_peer);
  if (!started_.empty()) return refuse_while_started("send_recv");
  const Result<size_t> payload = checked_send_recv_payload(send_buffer, send_peer, recv_buffer, recv_peer, count, type);
  if (!payload.ok()) return failure("send_recv", payload.error());
  const auto started = std::chrono::steady_clock::now();
  if (count > 0) {
    if (Status s = do_send_recv(send_buffer, send_peer, recv_buffer, recv_peer, count, type); !s.ok()) return failure("send_recv", s.error());
  }
  const auto finished = std::chrono::steady_clock::now();
  for (Collective kind : {Collective::send, Collective::recv}) {
    counters_.add(kind, static_cast<int64_t>(*payload), seconds_between(started, finished));
    record(kind, started, finished, *payload);
  }
  return Status::success();
}

Status Communicator::do_send_recv(const void* send, int send_peer, void* recv, int recv_peer, size_t count, DataType type) {
  auto begun = do_start_send(send, count, type, send_peer, 0);
  if (!begun.ok()) return begun.error();
  const Status received = do_recv(recv, count, type, recv_peer, 0);
  const Status sent = begun.value()->wait();
  return !received.ok() ? received : sent;
}

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_send(const void* send, size_t count, DataType type, int peer, int tag) {
  if (Status s = do_send(send, count, type, peer, tag); !s) return s.error();
  return std::unique_ptr<PendingCall>(std::make_unique<CompletedCall>());
}

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_recv(void* recv, size_t count, DataType type, int peer, int tag) {
  if (Status s = do_recv(recv, count, type, peer, tag); !s) return s.error();
  return std::unique_ptr<PendingCall>(std::make_unique<CompletedCall>());
}

namespace {

// A started recv and send waited for together (the default start_send_recv).
class BothHalves final : public Communicator::PendingCall {
 public:
  BothHalves(std::unique_ptr<Communicator::PendingCall> recv, std::unique_ptr<Communicator::PendingCall> send)
      : recv_(std::move(recv)), send_(std::move(send)) {}
  Result<bool> test() override {
    auto received = recv_->test();
    if (!received.ok()) return received;
    auto sent = send_->test();
    if (!sent.ok()) return sent;
    return received.value() && sent.value();
  }
  Status wait() override {
    const Status received = recv_->wait();
    const Status sent = send_->wait();
    return !received.ok() ? received : sent;
  }

 private:
  std::unique_ptr<Communicator::PendingCall> recv_, send_;
};

}  // namespace

Result<std::unique_ptr<Communicator::PendingCall>> Communicator::do_start_send_recv(const void* send, int send_peer, void* recv, int recv_peer,
                                                                                    size_t count, DataType type) {
  auto received = do_start_recv(recv, count, type, recv_peer, 0);
  if (!received.ok()) return received.error();
  auto sent = do_start_send(send, count, type, send_peer, 0);
  if (!sent.ok()) return sent.error();
  return std::unique_ptr<PendingCall>(std::make_unique<BothHalves>(std::move(received.value()), std::move(sent.value())));
}

Status Communicator::start_send(const void* buffer, size_t count, DataType type, int peer, int tag) {
  if (auto error = peer_error(peer, rank_, size_)) return failure("send", *error);
  if (tag < 0) return failure("send", invalid("tag " + std::to_string(tag) + " is negative"));
  const Result<size_t> payload = checked_payload(count, type, {buffer, buffer, 1, 0});
  if (!payload.ok()) return failure("send", payload.error());
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<PendingCall> call;
  if (count > 0) {
    auto begun = do_start_send(buffer, count, type, peer, tag);
    if (!begun.ok()) return failure("send", begun.error());
    call = std::move(begun.value());
  }
  transfers_.push_back(StartedTransfer{buffer, nullptr, *payload, std::move(call), started});
  return Status::success();
}

Status Communicator::start_send_recv(const void* send_buffer, int send_peer, void* recv_buffer, int recv_peer, size_t count, DataType type) {
  const Result<size_t> payload = checked_send_recv_payload(send_buffer, send_peer, recv_buffer, recv_peer, count, type);
  if (!payload.ok()) return failure("send_recv", payload.error());
  const auto started = std::chrono::steady_clock::now();
  std::unique_ptr<PendingCall> call;
  if (count > 0) {
    auto begun = do_start_send_recv(send_buffer, send_peer, recv_buffer, recv_peer, count, type);
    if (!begun.ok()) return failure("send_recv", begun.error());
    call = std::move(begun.value());
  }
  transfers_.push_back(StartedTransfer{send_buffer, recv_buffer, *payload, std::move(call), started});
  return Status::success();
}

// A started send or send_recv is counted and recorded from its start to the
// end of the wait that saw it complete (a send_recv as a send and a recv).
template <typename Which>
Status Communicator::finish_transfers_where(Which which) {
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    if (!which(*it)) {
      ++it;
      continue;
    }
    const char* call_name = it->recv != nullptr ? "send_recv" : "send";
    if (it->call) {
      if (Status waited = it->call->wait(); !waited.ok()) {
        transfers_.clear();  // the group is unusable after a backend error (see above)
        return failure(call_name, waited.error());
      }
    }
    const auto now = std::chrono::steady_clock::now();
    for (Collective kind : {Collective::send, Collective::recv}) {
      if ((kind == Collective::send ? it->send : it->recv) == nullptr) continue;
      counters_.add(kind, static_cast<int64_t>(it->payload), seconds_between(it->started, now));
      record(kind, it->started, now, it->payload);
    }
    it = transfers_.erase(it);
  }
  return Status::success();
}

Status Communicator::finish_send(const void* buffer) {
  return finish_transfers_where([buffer](const StartedTransfer& t) { return t.send == buffer; });
}

Status Communicator::finish_sends() {
  return finish_transfers_where([](const StartedTransfer& t) { return t.send != nullptr; });
}

size_t Communicator::started_sends() const {
  return static_cast<size_t>(std::count_if(transfers_.begin(), transfers_.end(), [](const StartedTransfer& t) { return t.send != nullptr; }));
}

Status Communicator::finish_recv(const void* buffer) {
  return finish_transfers_where([buffer](const StartedTransfer& t) { return t.recv == buffer; });
}

Status Communicator::barrier() {
  return run(Collective::barrier, Result<size_t>(size_t{0}), 1, [&] { return do_barrier(); });
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key, std::string name) {
  if (!started_.empty()) return refuse_while_started("split").error();
  if (color < 0) return failure("split", invalid("color " + std::to_string(color) + " is negative; every rank needs a group"));
  if (name.empty()) name = name_ + "/" + std::to_string(color);
  auto group = do_split(color, key, std::move(name));
  if (!group.ok()) return failure("split", group.error());
  return group;
}

Status broadcast_bytes(Communicator& group, void* bytes, size_t n, int root) {
  std::vector<fp16> elements((n + 1) / 2);
  if (group.rank() == root && n > 0) std::memcpy(elements.data(), bytes, n);
  if (Status s = group.broadcast(elements.data(), elements.data(), elements.size(), root); !s) return s;
  if (n > 0) std::memcpy(bytes, elements.data(), n);
  return Status::success();
}

}  // namespace tessera::engine::comm
