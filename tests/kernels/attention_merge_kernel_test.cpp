// Ring attention's kernels under the block emulator against the CPU ops: the
// log-sum-exp merge (kernels/attention_merge.h, ops/attention_merge.h), a
// block's fp32, bf16 or fp16 partial output merged into the fp32 running
// output over the rows the block reached (the second chunk's, or every row);
// and add_rows (kernels/residual.h, ops/residual.h), a block's gradient share
// added into strided rows (a query gradient into fused q|k|v rows). The same
// bits expected.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/attention_merge.h"
#include "tessera/engine/kernels/residual.h"
#include "tessera/engine/ops/attention_merge.h"
#include "tessera/engine/ops/residual.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_merge(const cpu::MergeRows& m) {
  const std::string at = std::string(type_name<T>()) + " rows " + std::to_string(m.first) + "+" + std::to_string(m.rows);
  const size_t outputs = static_cast<size_t>(m.B * m.T * m.NH * m.HS), stats = static_cast<size_t>(m.B * m.NH * m.T);
  const std::vector<float> running = random_values<float>(outputs, 91);
  const std::vector<T> partial = random_values<T>(outputs, 92);
  // Log-sum-exps a few units apart, so both weights matter.
  const std::vector<float> running_lse = random_values<float>(stats, 93, 3.0f), partial_lse = random_values<float>(stats, 94, 3.0f);
  std::vector<float> want = running, want_lse = running_lse, got = running, got_lse = running_lse;
  cpu::attention_merge(want.data(), want_lse.data(), partial.data(), partial_lse.data(), m);
  BlockEmulator(ThreadOrder::reverse).launch(attention_merge_shape(m), [&](HostContext& ctx) {
    attention_merge_body(ctx, got.data(), got_lse.data(), partial.data(), partial_lse.data(), m);
  });
  expect_bits_equal("attention merge output " + at, got, want);
  expect_bits_equal("attention merge log-sum-exp " + at, got_lse, want_lse);
  EXPECT_NE(want, running) << at;  // the merge changed the rows it reached
}

TEST(KernelEmulation, AttentionMergeMatchesCpuOp) {
  for (const cpu::MergeRows& m : {cpu::MergeRows{2, 10, 3, 8, 5, 5}, cpu::MergeRows{3, 7, 5, 4, 0, 7}}) {
    check_merge<float>(m);
    check_merge<bf16>(m);
    check_merge<fp16>(m);
  }
}

template <typename T>
void check_add_rows(int64_t first, int64_t rows) {
  const int64_t B = 2, Tn = 9, width = 12, dst_stride = 20, src_stride = 12;
  const std::string at = std::string(type_name<T>()) + " rows " + std::to_string(first) + "+" + std::to_string(rows);
  const std::vector<T> dst = random_values<T>(static_cast<size_t>(B * Tn * dst_stride), 95);
  const std::vector<T> src = random_values<T>(static_cast<size_t>(B * Tn * src_stride), 96);
  std::vector<T> want = dst, got = dst;
  cpu::add_rows(want.data(), dst_stride, src.data(), src_stride, width, B, Tn, first, rows);
  BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(B * rows * width), [&](HostContext& ctx) {
    add_rows_body(ctx, got.data(), dst_stride, src.data(), src_stride, width, B, Tn, first, rows);
  });
  expect_bits_equal("add_rows " + at, got, want);
  EXPECT_NE(std::memcmp(want.data(), dst.data(), want.size() * sizeof(T)), 0) << at;  // the rows were added to
}

TEST(KernelEmulation, AddRowsMatchesCpuOp) {
  for (auto [first, rows] : {std::pair<int64_t, int64_t>{0, 9}, {4, 5}}) {
    check_add_rows<float>(first, rows);
    check_add_rows<bf16>(first, rows);
    check_add_rows<fp16>(first, rows);
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
