// LayerNorm and RMSNorm kernel bodies under the block emulator against the
// CPU ops (ops/layernorm.h): rows of 1, 7, 33, 255, 257 and 768 columns
// (fewer than a warp, not a multiple of the 256-thread block, more than one
// block-stride), row counts that leave the last 64-row chunk of the
// parameter gradients partial, and a grid smaller than the row count.
#include <gtest/gtest.h>

#include <vector>

#include "block_emulator.h"
#include "kernel_check.h"
#include "reference_cases.h"
#include "tessera/engine/kernels/norms.h"

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
  const NormCase<T> c = layernorm_case<T>(size.N, size.C);
  const int64_t N = c.N, C = c.C;
  const std::string at = c.at + " grid " + std::to_string(rows.grid);
  std::vector<T> out(N * C), dinp, dweight, dbias;
  std::vector<float> mean(N), rstd(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      layernorm_forward_body(ctx, out.data(), mean.data(), rstd.data(), c.inp.data(), c.weight.data(), c.bias.data(), N, C, kNormEps);
    });
    dinp = c.dinp0, dweight = c.dweight0, dbias = c.dbias0;  // backward from the CPU's statistics: each half tested alone
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      layernorm_backward_input_body(ctx, dinp.data(), c.dout.data(), c.inp.data(), c.weight.data(), c.mean.data(), c.rstd.data(), N, C);
    });
    emulate_param_grads(order, dweight.data(), dbias.data(), c.dout.data(), c.inp.data(), c.mean.data(), c.rstd.data(), N, C);
    return fingerprint(out, mean, rstd, dinp, dweight, dbias);
  });
  const double tol = reduction_tolerance<T>(), stat_tol = reduction_tolerance<float>();
  expect_close("layernorm out " + at, out, c.out, tol);
  expect_close("layernorm mean " + at, mean, c.mean, stat_tol);
  expect_close("layernorm rstd " + at, rstd, c.rstd, stat_tol);
  expect_close("layernorm dinp " + at, dinp, c.dinp, tol);
  expect_close("layernorm dweight " + at, dweight, c.dweight, tol);
  expect_close("layernorm dbias " + at, dbias, c.dbias, tol);
}

template <typename T>
void check_rmsnorm(Size size, LaunchShape rows) {
  const NormCase<T> c = rmsnorm_case<T>(size.N, size.C);
  const int64_t N = c.N, C = c.C;
  const std::string at = c.at + " grid " + std::to_string(rows.grid);
  std::vector<T> out(N * C), dinp, dweight;
  std::vector<float> rstd(N);
  expect_same_in_both_orders([&](ThreadOrder order) {
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      rmsnorm_forward_body(ctx, out.data(), rstd.data(), c.inp.data(), c.weight.data(), N, C, kNormEps);
    });
    dinp = c.dinp0, dweight = c.dweight0;
    BlockEmulator(order).launch(rows, [&](HostContext& ctx) {
      rmsnorm_backward_input_body(ctx, dinp.data(), c.dout.data(), c.inp.data(), c.weight.data(), c.rstd.data(), N, C);
    });
    emulate_param_grads<T>(order, dweight.data(), nullptr, c.dout.data(), c.inp.data(), nullptr, c.rstd.data(), N, C);
    return fingerprint(out, rstd, dinp, dweight);
  });
  const double tol = reduction_tolerance<T>();
  expect_close("rmsnorm out " + at, out, c.out, tol);
  expect_close("rmsnorm rstd " + at, rstd, c.rstd, reduction_tolerance<float>());
  expect_close("rmsnorm dinp " + at, dinp, c.dinp, tol);
  expect_close("rmsnorm dweight " + at, dweight, c.dweight, tol);
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
