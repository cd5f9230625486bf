#include "block_emulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace tessera::engine::kernels::testing {
namespace {

// Kernel bodies are shallow (a few frames of arithmetic); std::function and
// the body's locals fit in far less.
constexpr size_t kStackBytes = size_t{64} << 10;
// CUDA's limit on threads per block (CUDA C++ Programming Guide, "Compute Capabilities").
constexpr unsigned kMaxThreadsPerBlock = 1024;

}  // namespace

// makecontext passes int arguments only: the emulator's address travels as two halves.
void BlockEmulator::entry(unsigned self_high, unsigned self_low) {
  auto* self = reinterpret_cast<BlockEmulator*>((static_cast<uintptr_t>(self_high) << 32) | self_low);
  Thread& thread = self->threads_[self->current_];
  (*self->body_)(thread.ctx);
  thread.state = State::done;
  // Returning resumes uc_link: the scheduler.
}

void BlockEmulator::launch(LaunchShape shape, const std::function<void(HostContext&)>& body) {
  if (shape.grid == 0 || shape.block == 0 || shape.block > kMaxThreadsPerBlock) {
    throw std::logic_error("launch of " + std::to_string(shape.grid) + " blocks of " + std::to_string(shape.block) + " threads: not a valid CUDA launch");
  }
  shape_ = shape;
  body_ = &body;
  threads_.resize(shape.block);
  exchange_.assign(2 * size_t{shape.block}, 0);
  const size_t shared_doubles = (shape.shared_bytes + sizeof(double) - 1) / sizeof(double);
  shared_ = std::make_unique<double[]>(std::max<size_t>(shared_doubles, 1));
  for (unsigned k = 0; k < shape.grid; ++k) run_block(order_ == ThreadOrder::forward ? k : shape.grid - 1 - k);
}

void BlockEmulator::run_block(unsigned block) {
  // Fresh shared memory holds garbage on a GPU: here all bits set, a NaN in any float.
  std::memset(shared_.get(), 0xff, std::max<size_t>(shape_.shared_bytes, 1));
  const auto self = reinterpret_cast<uintptr_t>(this);
  for (unsigned t = 0; t < shape_.block; ++t) {
    Thread& thread = threads_[t];
    if (!thread.stack) thread.stack = std::make_unique<char[]>(kStackBytes);
    thread.state = State::runnable;
    thread.shuffles = 0;
    thread.ctx.emulator_ = this;
    thread.ctx.block_ = block;
    thread.ctx.thread_ = t;
    thread.ctx.shared_ = reinterpret_cast<unsigned char*>(shared_.get());
    getcontext(&thread.context);
    thread.context.uc_stack.ss_sp = thread.stack.get();
    thread.context.uc_stack.ss_size = kStackBytes;
    thread.context.uc_link = &scheduler_;
    // void(*)() is the one function type GCC lets any function pointer be cast to (-Wcast-function-type).
    makecontext(&thread.context, reinterpret_cast<void (*)()>(&BlockEmulator::entry), 2, static_cast<unsigned>(self >> 32),
                static_cast<unsigned>(self & 0xffffffffu));
  }
  const unsigned n = shape_.block;
  while (true) {
    bool ran = false;
    for (unsigned k = 0; k < n; ++k) {
      const unsigned t = order_ == ThreadOrder::forward ? k : n - 1 - k;
      if (threads_[t].state != State::runnable) continue;
      current_ = t;
      swapcontext(&scheduler_, &threads_[t].context);
      ran = true;
      if (!error_.empty()) throw std::logic_error("block " + std::to_string(block) + ": " + error_);
    }
    if (std::all_of(threads_.begin(), threads_.end(), [](const Thread& th) { return th.state == State::done; })) return;
    if (!ran) throw std::logic_error("block " + std::to_string(block) + ": " + describe_stall());
  }
}

// A thread arrives at a barrier: the last of its group opens it for all; then
// it yields to the scheduler, which runs it again once the barrier is open.
void BlockEmulator::wait(unsigned thread, State barrier) {
  unsigned first = 0, last = shape_.block;  // the group: the block, or the thread's warp
  if (barrier == State::at_shuffle) {
    first = thread / kWarpSize * kWarpSize;
    last = first + kWarpSize;
    if (last > shape_.block) {
      error_ = "thread " + std::to_string(thread) + " shuffles in a warp of " + std::to_string(shape_.block - first) +
               " threads: a full-mask shuffle needs all 32 (blockDim must be a multiple of 32)";
      last = shape_.block;
    }
  }
  threads_[thread].state = barrier;
  const bool all_arrived = std::all_of(threads_.begin() + first, threads_.begin() + last, [barrier](const Thread& th) { return th.state == barrier; });
  if (all_arrived) {
    for (unsigned t = first; t < last; ++t) threads_[t].state = State::runnable;
  }
  swapcontext(&threads_[thread].context, &scheduler_);
}

// Two slots per thread, used by alternate shuffles: a lane cannot write slot
// p again (two shuffles later) before every lane has passed the shuffle in
// between, by when all have read slot p. So one barrier per shuffle suffices.
uint64_t BlockEmulator::exchange(unsigned thread, uint64_t bits, unsigned lane_mask) {
  if (lane_mask >= kWarpSize) error_ = "shuffle lane mask " + std::to_string(lane_mask) + " is outside the warp";
  Thread& self = threads_[thread];
  const size_t slot = 2 * thread + self.shuffles % 2;
  ++self.shuffles;
  exchange_[slot] = bits;
  wait(thread, State::at_shuffle);  // every lane has written its value
  const unsigned partner = (thread / kWarpSize * kWarpSize) | ((thread % kWarpSize) ^ (lane_mask % kWarpSize));
  return exchange_[2 * partner + slot % 2];
}

std::string BlockEmulator::describe_stall() const {
  unsigned at_sync = 0, at_shuffle = 0, done = 0;
  for (const Thread& th : threads_) {
    at_sync += th.state == State::at_sync;
    at_shuffle += th.state == State::at_shuffle;
    done += th.state == State::done;
  }
  return "barrier never opens: " + std::to_string(at_sync) + " threads wait at sync(), " + std::to_string(at_shuffle) + " at a shuffle, " +
         std::to_string(done) + " have ended (every thread of a block must reach each barrier)";
}

void expect_same_in_both_orders(const std::function<std::vector<double>(ThreadOrder)>& run) {
  const std::vector<double> forward = run(ThreadOrder::forward);
  const std::vector<double> reverse = run(ThreadOrder::reverse);
  ASSERT_EQ(forward.size(), reverse.size());
  size_t differing = 0;
  for (size_t i = 0; i < forward.size(); ++i) differing += std::memcmp(&forward[i], &reverse[i], sizeof(double)) != 0;
  EXPECT_EQ(differing, 0u) << "outputs depend on the order threads and blocks ran in";
}

}  // namespace tessera::engine::kernels::testing
