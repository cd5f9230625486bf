// Runs kernel bodies (engine/include/tessera/engine/kernels/thread_context.h)
// on the CPU with a GPU launch's grid, block, shared memory, barriers and warp
// shuffles, so that a kernel's parallel structure is tested where no GPU is.
//
// How: every emulated thread is a coroutine with its own stack (POSIX
// ucontext), and one OS thread runs them one at a time, each until it reaches a
// barrier (sync() or a shuffle) or ends; a barrier opens when every thread of
// its block (or warp) waits at it. We chose this over one std::thread per
// emulated thread because it is deterministic (the same interleaving every run,
// no locks) and makes a missing barrier fail reliably instead of by chance: the
// threads of a block run one after another between barriers, in `ThreadOrder`,
// so a thread that reads shared memory another thread has not written yet (no
// barrier between them) reads the 0xff filler (NaN), for some order. Blocks
// run one after another, in the same order. Tests run both orders and expect
// the same bits.
//
// A launch fails (std::logic_error) where a GPU would hang or misbehave: a
// thread ends while others wait at a barrier, threads wait at different kinds
// of barrier, or a full-mask shuffle runs in a warp of fewer than 32 threads.
// Not emulated: atomics and memory ordering between blocks (no kernel here uses them).
#pragma once

#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/engine/half.h"
#include "tessera/engine/kernels/thread_context.h"

namespace tessera::engine::kernels::testing {

enum class ThreadOrder { forward, reverse };

class BlockEmulator;

// What a kernel body sees under the emulator: DeviceContext's members.
class HostContext {
 public:
  unsigned block_idx() const { return block_; }
  unsigned thread_idx() const { return thread_; }
  unsigned block_dim() const;
  unsigned grid_dim() const;
  template <typename T>
  T* shared() const { return reinterpret_cast<T*>(shared_); }
  void sync();
  template <typename T>
  T shfl_xor(T value, unsigned lane_mask);

 private:
  friend class BlockEmulator;
  BlockEmulator* emulator_ = nullptr;
  unsigned block_ = 0, thread_ = 0;
  unsigned char* shared_ = nullptr;
};

class BlockEmulator {
 public:
  explicit BlockEmulator(ThreadOrder order) : order_(order) {}
  BlockEmulator(const BlockEmulator&) = delete;
  BlockEmulator& operator=(const BlockEmulator&) = delete;

  // Runs body(ctx) on every thread of every block of `shape`.
  void launch(LaunchShape shape, const std::function<void(HostContext&)>& body);

 private:
  friend class HostContext;
  enum class State { runnable, at_sync, at_shuffle, done };
  struct Thread {
    ucontext_t context{};
    std::unique_ptr<char[]> stack;
    State state = State::runnable;
    uint64_t shuffles = 0;  // how many this thread has made: picks its exchange slot
    HostContext ctx;
  };

  static void entry(unsigned self_high, unsigned self_low);
  void run_block(unsigned block);
  void wait(unsigned thread, State barrier);
  uint64_t exchange(unsigned thread, uint64_t bits, unsigned lane_mask);
  std::string describe_stall() const;

  ThreadOrder order_;
  LaunchShape shape_;
  const std::function<void(HostContext&)>* body_ = nullptr;
  std::vector<Thread> threads_;
  std::vector<uint64_t> exchange_;       // two shuffle slots per thread (exchange())
  std::unique_ptr<double[]> shared_;     // the block's shared memory (double: aligned for any type a kernel keeps there)
  ucontext_t scheduler_{};
  unsigned current_ = 0;
  std::string error_;
};

inline unsigned HostContext::block_dim() const { return emulator_->shape_.block; }
inline unsigned HostContext::grid_dim() const { return emulator_->shape_.grid; }
inline void HostContext::sync() { emulator_->wait(thread_, BlockEmulator::State::at_sync); }

template <typename T>
T HostContext::shfl_xor(T value, unsigned lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t), "shuffles move 32- or 64-bit values");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  bits = emulator_->exchange(thread_, bits, lane_mask);
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Runs `run(order)` under both thread orders; each run returns every output
// it produced, widened to double (fingerprint()); the two runs must give the
// same bits. The caller then checks the outputs of the second run.
void expect_same_in_both_orders(const std::function<std::vector<double>(ThreadOrder)>& run);

template <typename... Outputs>
std::vector<double> fingerprint(const Outputs&... outputs) {
  std::vector<double> all;
  auto append = [&all](const auto& v) {
    for (const auto& x : v) all.push_back(static_cast<double>(widen(x)));
  };
  (append(outputs), ...);
  return all;
}

}  // namespace tessera::engine::kernels::testing
