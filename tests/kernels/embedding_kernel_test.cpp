// Token and position embeddings under the block emulator against the CPU ops
// (ops/embedding.h): an odd width, repeated tokens (their gradients add in
// row order, as on the CPU), a tensor-parallel vocabulary slice (other
// ranks' tokens give 0), a sequence-parallel first row; and the position
// embedding of a context-parallel rank's two chunks (cp 3, rank 1: its 4
// local tokens are positions 2, 3, 8, 9 of 12): the same bits expected.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/embedding.h"
#include "tessera/engine/ops/embedding.h"

namespace tessera::engine::kernels::testing {
namespace {

template <typename T>
void check_embedding(cpu::VocabSlice slice) {
  const int64_t B = 2, Tn = 3, C = 5, V = 7, rows = B * Tn;
  const std::string at = std::string(type_name<T>()) + " slice from " + std::to_string(slice.first_class);
  const std::vector<int32_t> tokens = {3, 6, 3, 0, 3, 5};  // token 3 three times
  const auto wte = random_values<T>(V * C, 91), wpe = random_values<T>(Tn * C, 92), dout = random_values<T>(rows * C, 93);
  auto emulate = [](LaunchShape shape, auto body) { BlockEmulator(ThreadOrder::reverse).launch(shape, body); };

  std::vector<T> want(rows * C), got(rows * C);
  cpu::embedding_forward(want.data(), tokens.data(), wte.data(), B, Tn, C, slice);
  emulate(elementwise_shape(rows * C), [&](HostContext& ctx) { embedding_forward_body(ctx, got.data(), tokens.data(), wte.data(), rows, C, slice); });
  expect_bits_equal("embedding forward " + at, got, want);
  const int64_t first_row = 1, sp_rows = 4;  // a sequence-parallel rank's rows 1..4
  cpu::position_embedding_forward(want.data(), wpe.data(), sp_rows, Tn, C, first_row);
  emulate(elementwise_shape(sp_rows * C),
          [&](HostContext& ctx) { position_embedding_forward_body(ctx, got.data(), wpe.data(), sp_rows, Tn, C, first_row); });
  expect_bits_equal("position embedding forward " + at, got, want);

  std::vector<T> want_dwte = random_values<T>(V * C, 94), got_dwte = want_dwte;
  cpu::embedding_backward(want_dwte.data(), dout.data(), tokens.data(), B, Tn, C, slice);
  emulate(elementwise_shape(C), [&](HostContext& ctx) { embedding_backward_body(ctx, got_dwte.data(), dout.data(), tokens.data(), rows, C, slice); });
  expect_bits_equal("embedding backward " + at, got_dwte, want_dwte);
  std::vector<T> want_dwpe = random_values<T>(Tn * C, 95), got_dwpe = want_dwpe;
  cpu::position_embedding_backward(want_dwpe.data(), dout.data(), B, Tn, C);
  emulate(elementwise_shape(Tn * C), [&](HostContext& ctx) { position_embedding_backward_body(ctx, got_dwpe.data(), dout.data(), B, Tn, C); });
  expect_bits_equal("position embedding backward " + at, got_dwpe, want_dwpe);
}

template <typename T>
void check_context_parallel_positions() {
  const int64_t B = 2, Tn = 4, C = 5;
  const planner::ContextSplit split{3, 1};
  const auto wpe = random_values<T>(3 * Tn * C, 96), dout = random_values<T>(B * Tn * C, 97);
  std::vector<T> want = random_values<T>(B * Tn * C, 98), got = want;
  cpu::position_embedding_forward(want.data(), wpe.data(), B * Tn, Tn, C, 0, split);
  BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(B * Tn * C), [&](HostContext& ctx) {
    position_embedding_forward_body(ctx, got.data(), wpe.data(), B * Tn, Tn, C, 0, split);
  });
  expect_bits_equal(std::string("position embedding forward, cp 3 rank 1, ") + type_name<T>(), got, want);
  std::vector<T> want_dwpe = random_values<T>(3 * Tn * C, 99), got_dwpe = want_dwpe;
  cpu::position_embedding_backward(want_dwpe.data(), dout.data(), B, Tn, C, split);
  BlockEmulator(ThreadOrder::reverse).launch(elementwise_shape(Tn * C), [&](HostContext& ctx) {
    position_embedding_backward_body(ctx, got_dwpe.data(), dout.data(), B, Tn, C, split);
  });
  expect_bits_equal(std::string("position embedding backward, cp 3 rank 1, ") + type_name<T>(), got_dwpe, want_dwpe);
}

TEST(KernelEmulation, ContextParallelPositionEmbeddingsMatchCpuOps) {
  check_context_parallel_positions<float>();
  check_context_parallel_positions<bf16>();
}

TEST(KernelEmulation, EmbeddingsMatchCpuOps) {
  for (cpu::VocabSlice slice : {cpu::VocabSlice{}, cpu::VocabSlice{3, 3}}) {
    check_embedding<float>(slice);
    check_embedding<bf16>(slice);
    check_embedding<fp16>(slice);
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
