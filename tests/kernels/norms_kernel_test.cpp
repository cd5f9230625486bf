// LayerNorm and RMSNorm kernel bodies under the block emulator against the
// CPU ops (ops/layernorm.h): rows of 1, 7, 33, 255, 257 and 768 columns
// (fewer than a warp, not a multiple of the 256-thread block, more than one
// block-stride), row counts that leave the last 64-row chunk of the
// parameter gradients partial, and a grid smaller than the row count.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "tessera/engine/kernels/norms.h"
#include "tessera/engine/ops/layernorm.h"

namespace tessera::engine::kernels::testing {
namespace {

struct Size {
  int64_t N, C;
};
const Size kSizes[] = {{1, 1}, {3, 1}, {5, 7}, {7, 33}, {2, 255}, {3, 257}, {70, 9}, {4, 768}};

// The launches of one norm's backward, as the CUDA launcher makes them.
template <typename T>
void emulate_param_grads(ThreadOrder order, T* dweight, T* dbias, const T* dout, const T* inp, const float* mean, const float* rstd, int64_t N,
                         int64_t C) {
  const int64_t chunks = norm_chunks(N);
  std::vector<float> partial_dw(static_cast<size_t>(chunks * C)), partial_db(static_cast<size_t>(chunks * C));
  float* pdb = dbias ? partial_db.data() : nullptr;
  BlockEmulator(order).launch(norm_partials_shape(N, C), [&](HostContext& ctx) {
    norm_param_partials_body(ctx, partial_dw.data(), pdb, dout, inp, mean, rstd, N, C);
  });
  BlockEmulator(order).launch(norm_columns_shape(C), [&](HostContext& ctx) { column_sums_accumulate_body(ctx, dweight, partial_dw.data(), chunks, C); });
  if (dbias) {
    BlockEmulator(order).launch(norm_columns_shape(C), [&](HostContext& ctx) { column_sums_accumulate_body(ctx, dbias, pdb, chunks, C); });
  }
}

template <typename T>
void check_layernorm(Size size, LaunchShape rows) {
  const auto [N, C] = size;
  const std::string at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(C) + " grid " + std::to_string(rows.grid);
  const auto inp = random_values<T>(N * C, 1, 2.0f, 0.5f), weight = random_values<T>(C, 2), bias = random_values<T>(C, 3);
  const auto dout = random_values<T>(N * C, 4), dinp0 = random_values<T>(N * C, 5), dweight0 = random_values<T>(C, 6), dbias0 = random_values<T>(C, 7);
  // The CPU op: forward, then backward accumulating into the same starting gradients.
  std::vector<T> out(N * C), dinp = dinp0, dweight = dweight0, dbias = dbias0;
  std::vector<float> mean(N), rstd(N);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C, 1e-5f);
  cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), mean.data(), rstd.data(), N, C);

  std::vector<T> k_out(N * C), k_dinp, k_dweight, k_dbias;
  std::vector<float> k_mean(N), k_rstd(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      layernorm_forward_body(ctx, k_out.data(), k_mean.data(), k_rstd.data(), inp.data(), weight.data(), bias.data(), N, C, 1e-5f);
    });
    k_dinp = dinp0, k_dweight = dweight0, k_dbias = dbias0;  // backward from the CPU's statistics: each half tested alone
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      layernorm_backward_input_body(ctx, k_dinp.data(), dout.data(), inp.data(), weight.data(), mean.data(), rstd.data(), N, C);
    });
    emulate_param_grads(order, k_dweight.data(), k_dbias.data(), dout.data(), inp.data(), mean.data(), rstd.data(), N, C);
    return fingerprint(k_out, k_mean, k_rstd, k_dinp, k_dweight, k_dbias);
  });
  const double tol = reduction_tolerance<T>(), stat_tol = reduction_tolerance<float>();
  expect_close("layernorm out " + at, k_out, out, tol);
  expect_close("layernorm mean " + at, k_mean, mean, stat_tol);
  expect_close("layernorm rstd " + at, k_rstd, rstd, stat_tol);
  expect_close("layernorm dinp " + at, k_dinp, dinp, tol);
  expect_close("layernorm dweight " + at, k_dweight, dweight, tol);
  expect_close("layernorm dbias " + at, k_dbias, dbias, tol);
}

template <typename T>
void check_rmsnorm(Size size, LaunchShape rows) {
  const auto [N, C] = size;
  const std::string at = std::string(type_name<T>()) + " " + std::to_string(N) + "x" + std::to_string(C) + " grid " + std::to_string(rows.grid);
  const auto inp = random_values<T>(N * C, 11, 2.0f, 0.5f), weight = random_values<T>(C, 12);
  const auto dout = random_values<T>(N * C, 14), dinp0 = random_values<T>(N * C, 15), dweight0 = random_values<T>(C, 16);
  std::vector<T> out(N * C), dinp = dinp0, dweight = dweight0;
  std::vector<float> rstd(N);
  cpu::rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
  cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(), N, C);

  std::vector<T> k_out(N * C), k_dinp, k_dweight;
  std::vector<float> k_rstd(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      rmsnorm_forward_body(ctx, k_out.data(), k_rstd.data(), inp.data(), weight.data(), N, C, 1e-5f);
    });
    k_dinp = dinp0, k_dweight = dweight0;
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      rmsnorm_backward_input_body(ctx, k_dinp.data(), dout.data(), inp.data(), weight.data(), rstd.data(), N, C);
    });
    emulate_param_grads<T>(order, k_dweight.data(), nullptr, dout.data(), inp.data(), nullptr, rstd.data(), N, C);
    return fingerprint(k_out, k_rstd, k_dinp, k_dweight);
  });
  const double tol = reduction_tolerance<T>();
  expect_close("rmsnorm out " + at, k_out, out, tol);
  expect_close("rmsnorm rstd " + at, k_rstd, rstd, reduction_tolerance<float>());
  expect_close("rmsnorm dinp " + at, k_dinp, dinp, tol);
  expect_close("rmsnorm dweight " + at, k_dweight, dweight, tol);
}

// The launch shape the CUDA launcher uses, and one of 2 blocks that strides
// over the rows (fp32 only: the striding does not depend on the type).
LaunchShape two_blocks(int64_t N) {
  LaunchShape few = norm_rows_shape(N);
  few.grid = 2;
  return few;
}

TEST(KernelEmulation, LayerNormMatchesCpuOp) {
  for (const Size& size : kSizes) {
    check_layernorm<float>(size, norm_rows_shape(size.N));
    check_layernorm<bf16>(size, norm_rows_shape(size.N));
    check_layernorm<fp16>(size, norm_rows_shape(size.N));
    if (size.N == 5 || size.N == 7) check_layernorm<float>(size, two_blocks(size.N));
  }
}

TEST(KernelEmulation, RmsNormMatchesCpuOp) {
  for (const Size& size : kSizes) {
    check_rmsnorm<float>(size, norm_rows_shape(size.N));
    check_rmsnorm<bf16>(size, norm_rows_shape(size.N));
    check_rmsnorm<fp16>(size, norm_rows_shape(size.N));
    if (size.N == 5 || size.N == 7) check_rmsnorm<float>(size, two_blocks(size.N));
  }
}

}  // namespace
}  // namespace tessera::engine::kernels::testing
