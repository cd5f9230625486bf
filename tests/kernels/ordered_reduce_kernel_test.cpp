// The NCCL backend's rank-order reduction body under the block emulator
// against the CPU reduction every backend shares (comm/ordered_reduce.h):
// 1 to 5 ranks, 1 to 1000 elements (fewer and more than a block, and a grid
// whose last block is partly idle), sum and max, fp32, fp64, bf16 and fp16,
// with NaN and signed zeros among the operands of max: the same bits expected.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/comm/ordered_reduce.h"
#include "tessera/engine/kernels/ordered_reduce.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_reduction(int n, int64_t count, comm::ReduceOp op) {
  const std::string at = std::string(enum_name(comm::data_type_of<T>())) + " ranks " + std::to_string(n) + " count " + std::to_string(count) +
                         " " + std::string(enum_name(op));
  std::vector<T> slices = random_values<T>(static_cast<size_t>(n * count), 91, 1000.0f);
  if (op == comm::ReduceOp::max && count > 2) {
    slices[1] = narrow<T>(std::numeric_limits<float>::quiet_NaN());  // rank 0's NaN wins over everything after it
    slices[static_cast<size_t>((n - 1) * count + 2)] = narrow<T>(std::numeric_limits<float>::quiet_NaN());  // the last rank's too
    for (int r = 0; r < n; ++r) slices[static_cast<size_t>(r * count)] = narrow<T>(r % 2 == 0 ? -0.0f : 0.0f);  // equal: rank 0's -0 stays
  }
  std::vector<T> want(static_cast<size_t>(count)), got(static_cast<size_t>(count));
  comm::reduce_in_rank_order(want.data(), slices.data(), n, static_cast<size_t>(count), comm::data_type_of<T>(), op);
  for (ThreadOrder order : {ThreadOrder::forward, ThreadOrder::reverse}) {
    BlockEmulator(order).launch(elementwise_shape(count), [&](HostContext& ctx) {
      ordered_reduce_body(ctx, got.data(), slices.data(), n, count, op == comm::ReduceOp::max);
    });
    expect_bits_equal("ordered reduce " + at, got, want);
  }
}

TEST(KernelEmulation, OrderedReduceMatchesTheCommunicatorsCpuReduction) {
  for (int n : {1, 2, 3, 5}) {
    for (int64_t count : {1, 3, 257, 1000}) {
      for (comm::ReduceOp op : {comm::ReduceOp::sum, comm::ReduceOp::max}) {
        check_reduction<float>(n, count, op);
        check_reduction<double>(n, count, op);
        check_reduction<bf16>(n, count, op);
        check_reduction<fp16>(n, count, op);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
