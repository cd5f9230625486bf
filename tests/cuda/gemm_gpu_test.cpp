// cuBLASLt GEMMs (engine/cuda/gemm.h) against a double-precision product on
// the host: every transpose combination, awkward sizes, fp32, bf16 and fp16,
// with beta and with the bias and bias + GELU epilogues. The bound is a sum's:
// each output's error against Σ|terms| (sum_tolerance(K)), and one rounding of
// a 16-bit output. Skipped without a CUDA device; run by tools/gpu-check.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "../kernels/kernel_check.h"
#include "device_buffer.h"
#include "tessera/engine/cuda/gemm.h"
#include "tessera/engine/elementwise_math.h"

namespace tessera::engine::cuda::testing {
namespace {

using kernels::testing::expect_close;
using kernels::testing::random_values;
using kernels::testing::reduction_tolerance;
using kernels::testing::sum_tolerance;
using kernels::testing::type_name;

using GemmOnGpu = GpuTest;

// op(X)[r][c] of a row-major matrix stored with leading dimension ld.
template <typename T>
double element(const std::vector<T>& X, int64_t ld, bool transposed, int64_t r, int64_t c) {
  return static_cast<double>(widen(transposed ? X[static_cast<size_t>(c * ld + r)] : X[static_cast<size_t>(r * ld + c)]));
}

// `offset`: every operand starts that many elements into its buffer (1: a
// 16-bit one is only 2-byte aligned, as the step's parameters at flat offsets often are).
template <typename T>
void check(Gemm& gemm, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b, GemmEpilogue epilogue, size_t offset = 0) {
  GemmCall call{trans_a, trans_b, M, N, K, trans_a ? M : K, trans_b ? K : N, N, 0.75f, epilogue == GemmEpilogue::none ? 0.5f : 0.0f, epilogue};
  const auto A = random_values<T>(static_cast<size_t>(M * K), 81), B = random_values<T>(static_cast<size_t>(K * N), 82);
  const auto C0 = random_values<T>(static_cast<size_t>(M * N), 83), bias = random_values<T>(static_cast<size_t>(N), 84);
  const auto shifted = [offset](const std::vector<T>& values) {
    std::vector<T> buffer(offset, T{});
    buffer.insert(buffer.end(), values.begin(), values.end());
    return buffer;
  };
  DeviceBuffer<T> dA(shifted(A)), dB(shifted(B)), dC(shifted(C0)), dbias(shifted(bias));
  const std::string error =
      gemm.run(call, dA.get() + offset, dB.get() + offset, dC.get() + offset, epilogue == GemmEpilogue::none ? nullptr : dbias.get() + offset, nullptr);
  ASSERT_EQ(error, "");
  std::vector<double> want(static_cast<size_t>(M * N)), magnitude(want.size());
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double sum = 0, size = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double product = element(A, call.lda, trans_a, i, k) * element(B, call.ldb, trans_b, k, j);
        sum += product, size += std::abs(product);
      }
      const double c = static_cast<double>(widen(C0[static_cast<size_t>(i * N + j)]));
      double value = call.alpha * sum + call.beta * c;
      size = std::abs(call.alpha) * size + std::abs(call.beta * c);
      if (epilogue != GemmEpilogue::none) {
        const double b = static_cast<double>(widen(bias[static_cast<size_t>(j)]));
        value += b, size += std::abs(b);
      }
      if (epilogue == GemmEpilogue::bias_gelu) value = math::gelu(value);  // its slope stays below 1.13: the error carries over
      want[static_cast<size_t>(i * N + j)] = value;
      magnitude[static_cast<size_t>(i * N + j)] = size;
    }
  }
  const char* epilogues[] = {"", " + bias", " + bias + gelu"};
  const std::string what = std::string("gpu gemm ") + type_name<T>() + " " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                           (trans_a ? " At" : " A") + (trans_b ? "Bt" : "B") + epilogues[static_cast<int>(epilogue)];
  std::vector<T> got = dC.host();
  got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(offset));
  expect_close(what + (offset > 0 ? " at offset " + std::to_string(offset) : ""), got, want, std::max(reduction_tolerance<T>(), 2 * sum_tolerance(K)),
               magnitude);
}

TEST_F(GemmOnGpu, MatchesTheProductInEveryLayoutTypeAndEpilogue) {
  Gemm gemm;
  ASSERT_EQ(gemm.error(), "");
  struct Size {
    int64_t M, N, K;
  };
  for (const Size& s : {Size{1, 1, 1}, Size{7, 13, 5}, Size{33, 65, 127}, Size{128, 768, 256}, Size{257, 1000, 513}}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (GemmEpilogue epilogue : {GemmEpilogue::none, GemmEpilogue::bias, GemmEpilogue::bias_gelu}) {
          check<float>(gemm, s.M, s.N, s.K, trans_a, trans_b, epilogue);
          check<bf16>(gemm, s.M, s.N, s.K, trans_a, trans_b, epilogue);
          check<fp16>(gemm, s.M, s.N, s.K, trans_a, trans_b, epilogue);
        }
      }
    }
  }
}

// cuBLASLt's heuristic assumes 256-byte aligned operands unless each call
// says otherwise (device/pointer_alignment.h); these are 2 (16-bit) or 4 bytes.
TEST_F(GemmOnGpu, MatchesTheProductWithBarelyAlignedOperands) {
  Gemm gemm;
  ASSERT_EQ(gemm.error(), "");
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (GemmEpilogue epilogue : {GemmEpilogue::none, GemmEpilogue::bias}) {
        check<float>(gemm, 64, 96, 128, trans_a, trans_b, epilogue, 1);
        check<bf16>(gemm, 64, 96, 128, trans_a, trans_b, epilogue, 1);
        check<fp16>(gemm, 64, 96, 128, trans_a, trans_b, epilogue, 1);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::engine::cuda::testing
