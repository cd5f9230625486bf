// The vocabulary-parallel fused cross-entropy (kernels/vocab_parallel_cross_entropy.h)
// under the block emulator, tp ranks at a time, against the CPU op's
// vocabulary-parallel path (ops/cross_entropy.h) run by tp threads whose
// `reduce` combines the ranks' values in rank order, as the communicator
// does. The kernel side combines its passes' values over the ranks in the same
// order on the host (the all-reduces of the GPU step). Awkward sizes: a rank
// with no valid class (V = 1 over 2 ranks), slices of 11 and 513 columns
// (one past the 512-thread block), a last rank with padding, targets at the
// first and last class and on every rank; fp32, bf16 and fp16 logits. Each
// rank's padding columns hold random values, which must be ignored.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/comm/dry_run.h"
#include "tessera/engine/kernels/vocab_parallel_cross_entropy.h"
#include "tessera/engine/model/tensor_parallel.h"
#include "tessera/engine/ops/cross_entropy.h"

namespace tessera::engine::kernels::testing {
namespace {

struct Size {
  int64_t N, V, tp;
};
const Size kSizes[] = {{2, 1, 2}, {4, 31, 3}, {3, 1026, 2}, {5, 997, 4}};

// Rank r's slice of a vocabulary of V over tp ranks, by the engine's rule
// (model/tensor_parallel.h, on a dry-run group of tp ranks that only says who it is).
struct RankSlice {
  int64_t rows;  // columns of this rank's logits (the padded share)
  cpu::VocabSlice slice;
};
RankSlice rank_slice(int64_t V, int64_t tp, int64_t r) {
  const auto group = comm::make_dry_run_communicator(static_cast<int>(r), static_cast<int>(tp));
  const TensorParallel split(group.get(), false);
  return {split.vocab_rows(V), cpu::VocabSlice{split.vocab_begin(V), split.vocab_valid(V)}};
}

// The rank-order combination of one value per row over the ranks, in place in every rank's `values`.
void combine(std::vector<std::vector<float>>& values, comm::ReduceOp op) {
  const size_t N = values.front().size();
  for (size_t n = 0; n < N; ++n) {
    float total = values.front()[n];
    for (size_t r = 1; r < values.size(); ++r) total = op == comm::ReduceOp::max ? std::max(total, values[r][n]) : total + values[r][n];
    for (auto& v : values) v[n] = total;
  }
}

// The CPU op on tp threads, one per rank, over its own (N, rows) fp32 logits:
// each rank's losses (the group's, all the same) and probabilities turned into dlogits.
void cpu_vocab_parallel(std::vector<std::vector<float>>& losses, std::vector<std::vector<float>>& logits, const std::vector<int32_t>& targets,
                        int64_t N, int64_t V, int64_t tp) {
  std::vector<std::vector<float>> deposited(static_cast<size_t>(tp), std::vector<float>(static_cast<size_t>(N)));
  std::barrier meet(static_cast<std::ptrdiff_t>(tp));
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < tp; ++r) {
    ranks.emplace_back([&, r] {
      const RankSlice mine = rank_slice(V, tp, r);
      auto reduce = [&](float* values, int64_t n, comm::ReduceOp op) {
        std::copy(values, values + n, deposited[static_cast<size_t>(r)].begin());
        meet.arrive_and_wait();
        if (r == 0) combine(deposited, op);
        meet.arrive_and_wait();
        std::copy(deposited[static_cast<size_t>(r)].begin(), deposited[static_cast<size_t>(r)].begin() + n, values);
        meet.arrive_and_wait();
      };
      cpu::cross_entropy_forward(losses[static_cast<size_t>(r)].data(), logits[static_cast<size_t>(r)].data(), targets.data(), N, mine.rows, mine.slice,
                                 reduce);
      cpu::cross_entropy_backward(logits[static_cast<size_t>(r)].data(), targets.data(), N, mine.rows, 1.0f, mine.slice);
    });
  }
  for (auto& t : ranks) t.join();
}

template <typename T>
void check_vocab_parallel(Size size) {
  const int64_t N = size.N, V = size.V, tp = size.tp;
  const std::string at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(V) + " over " + std::to_string(tp) + " ranks";
  const int64_t rows = rank_slice(V, tp, 0).rows;
  std::vector<int32_t> targets(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) targets[static_cast<size_t>(n)] = static_cast<int32_t>(n == 0 ? V - 1 : n == 1 ? 0 : (n * 7919) % V);
  // Each rank's logits, padding columns included (random: they must not count).
  std::vector<std::vector<T>> logits;
  for (int64_t r = 0; r < tp; ++r) logits.push_back(random_values<T>(N * rows, static_cast<uint32_t>(31 + r), 3.0f));

  std::vector<std::vector<float>> cpu_losses(static_cast<size_t>(tp), std::vector<float>(static_cast<size_t>(N)));
  std::vector<std::vector<float>> cpu_logits;
  for (const auto& l : logits) {
    cpu_logits.emplace_back(l.size());
    std::transform(l.begin(), l.end(), cpu_logits.back().begin(), [](T x) { return static_cast<float>(widen(x)); });
  }
  cpu_vocab_parallel(cpu_losses, cpu_logits, targets, N, V, tp);

  std::vector<std::vector<T>> got;
  std::vector<std::vector<float>> losses;
  expect_same_in_both_orders([&](ThreadOrder order) {
    got = logits;
    const LaunchShape shape = vocab_parallel_cross_entropy_shape(N);
    std::vector<std::vector<float>> max(static_cast<size_t>(tp), std::vector<float>(static_cast<size_t>(N)));
    std::vector<std::vector<float>> sum = max;
    losses = max;
    for (int64_t r = 0; r < tp; ++r) {
      const int64_t valid = rank_slice(V, tp, r).slice.valid;
      BlockEmulator(order).launch(shape, [&](HostContext& ctx) { vocab_row_max_body(ctx, max[r].data(), got[r].data(), N, rows, valid); });
    }
    combine(max, comm::ReduceOp::max);
    for (int64_t r = 0; r < tp; ++r) {
      const int64_t valid = rank_slice(V, tp, r).slice.valid;
      BlockEmulator(order).launch(shape, [&](HostContext& ctx) { vocab_row_sum_exp_body(ctx, sum[r].data(), got[r].data(), max[r].data(), N, rows, valid); });
    }
    combine(sum, comm::ReduceOp::sum);
    for (int64_t r = 0; r < tp; ++r) {
      const cpu::VocabSlice slice = rank_slice(V, tp, r).slice;
      BlockEmulator(order).launch(shape, [&](HostContext& ctx) {
        vocab_parallel_loss_body(ctx, losses[r].data(), got[r].data(), targets.data(), max[r].data(), sum[r].data(), N, rows, slice, 1.0f, true);
      });
    }
    combine(losses, comm::ReduceOp::sum);
    std::vector<double> all;
    for (int64_t r = 0; r < tp; ++r) {
      const std::vector<double> part = fingerprint(losses[r], got[r]);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  });
  for (int64_t r = 0; r < tp; ++r) {
    const std::string rank = at + ", rank " + std::to_string(r);
    expect_close("vocab-parallel losses " + rank, losses[r], cpu_losses[r], reduction_tolerance<float>());
    expect_close("vocab-parallel dlogits " + rank, got[r], cpu_logits[r], reduction_tolerance<T>());
  }
}

TEST(KernelEmulation, VocabParallelCrossEntropyMatchesCpuOp) {
  for (const Size& size : kSizes) {
    check_vocab_parallel<float>(size);
    check_vocab_parallel<bf16>(size);
    check_vocab_parallel<fp16>(size);
  }
}

// Over one rank the three passes compute what the one-rank fused kernel does, bit for bit.
TEST(KernelEmulation, VocabParallelCrossEntropyOnOneRankIsTheFusedKernel) {
  const int64_t N = 3, V = 513;
  const auto logits = random_values<bf16>(N * V, 41, 3.0f);
  const std::vector<int32_t> targets = {512, 0, 200};
  std::vector<bf16> fused = logits, passes = logits;
  std::vector<float> fused_losses(N), losses(N), max(N), sum(N);
  const LaunchShape shape = vocab_parallel_cross_entropy_shape(N);
  BlockEmulator(ThreadOrder::forward).launch(shape, [&](HostContext& ctx) {
    fused_cross_entropy_body(ctx, fused_losses.data(), fused.data(), targets.data(), N, V, V, 0.25f, true);
  });
  BlockEmulator(ThreadOrder::forward).launch(shape, [&](HostContext& ctx) { vocab_row_max_body(ctx, max.data(), passes.data(), N, V, V); });
  BlockEmulator(ThreadOrder::forward).launch(shape, [&](HostContext& ctx) { vocab_row_sum_exp_body(ctx, sum.data(), passes.data(), max.data(), N, V, V); });
  BlockEmulator(ThreadOrder::forward).launch(shape, [&](HostContext& ctx) {
    vocab_parallel_loss_body(ctx, losses.data(), passes.data(), targets.data(), max.data(), sum.data(), N, V, cpu::VocabSlice{0, V}, 0.25f, true);
  });
  expect_bits_equal("one-rank losses", losses, fused_losses);
  expect_bits_equal("one-rank dlogits", passes, fused);
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
