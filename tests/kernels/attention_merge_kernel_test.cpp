// Ring attention's log-sum-exp merge (kernels/attention_merge.h) under the
// block emulator against the CPU op (ops/attention_merge.h): a block's fp32,
// bf16 or fp16 partial output merged into the fp32 running output, over the
// rows the block reached (the second chunk's, or every row), with head
// counts that leave a grid's last block part empty: the same bits expected.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/attention_merge.h"
#include "tessera/engine/ops/attention_merge.h"

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

}  // namespace
}  // namespace tessera::engine::kernels::testing
