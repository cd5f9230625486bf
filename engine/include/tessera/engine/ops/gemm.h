// Row-major GEMM on the CPU: C (M, N) = alpha · op(A) · op(B) + beta · C.
// fp32 and fp64 operands go straight to OpenBLAS (cblas_sgemm / cblas_dgemm).
// Any 16-bit operand sends the product through fp32 tiles: op(A), op(B) and C
// are widened kGemmTile × kGemmTile at a time into the calling thread's
// workspace, the C tile accumulates over all of K in fp32 and is rounded once
// when stored. Outside a parallel region the output tiles are spread over the
// OpenMP threads; inside one (attention's per-head loop) the calling thread
// runs them alone.
#pragma once

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tessera/engine/half.h"
#include "tessera/engine/ops/workspace.h"

namespace tessera::engine::cpu {

// OpenBLAS's pthreads build spins its own threads against the OpenMP threads of
// the element-wise ops; on 2 cores one BLAS thread trains tiny-gpt2 5.7 times
// faster than two (14,190 against 2,478 tokens/s, measured with `tessera
// train`). The OpenMP build (engine/CMakeLists.txt) shares the threads and
// needs nothing. The engine calls this once before computing.
inline void configure_blas_threads() {
#if !defined(TESSERA_BLAS_OPENMP)
  openblas_set_num_threads(1);
#endif
}

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

inline void blas_gemm(const GemmShape& s, float alpha, const float* A, const float* B, float beta, float* C) {
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.M),
              static_cast<int>(s.N), static_cast<int>(s.K), alpha, A, static_cast<int>(s.lda), B, static_cast<int>(s.ldb), beta, C,
              static_cast<int>(s.ldc));
}

inline void blas_gemm(const GemmShape& s, double alpha, const double* A, const double* B, double beta, double* C) {
  cblas_dgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(s.M),
              static_cast<int>(s.N), static_cast<int>(s.K), alpha, A, static_cast<int>(s.lda), B, static_cast<int>(s.ldb), beta, C,
              static_cast<int>(s.ldc));
}

// Widens rows [r0, r0 + rows) and columns [c0, c0 + cols) of op(X) into a dense tile.
template <typename T>
void widen_tile(float* tile, const T* X, int64_t ld, bool transposed, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      tile[r * cols + c] = widen(transposed ? X[(c0 + c) * ld + r0 + r] : X[(r0 + r) * ld + c0 + c]);
    }
  }
}

template <typename TA, typename TB, typename TC>
void tiled_gemm(const GemmShape& s, float alpha, const TA* A, const TB* B, float beta, TC* C, Workspace<float>& workspace) {
  constexpr int64_t tile = planner::kGemmTile;
  const int64_t row_tiles = (s.M + tile - 1) / tile, col_tiles = (s.N + tile - 1) / tile;
  auto run_tile = [&](int64_t index) {
    float* a = workspace.gemm_tiles();
    float* b = a + tile * tile;
    float* c = b + tile * tile;
    const int64_t m0 = index / col_tiles * tile, n0 = index % col_tiles * tile;
    const int64_t rows = std::min(tile, s.M - m0), cols = std::min(tile, s.N - n0);
    if (beta == 0.0f) {
      std::fill(c, c + rows * cols, 0.0f);
    } else {
      widen_tile(c, C, s.ldc, false, m0, n0, rows, cols);
      for (int64_t i = 0; i < rows * cols; ++i) c[i] *= beta;
    }
    for (int64_t k0 = 0; k0 < s.K; k0 += tile) {
      const int64_t depth = std::min(tile, s.K - k0);
      widen_tile(a, A, s.lda, s.trans_a, m0, k0, rows, depth);
      widen_tile(b, B, s.ldb, s.trans_b, k0, n0, depth, cols);
      blas_gemm(GemmShape{false, false, rows, cols, depth, depth, cols, cols}, alpha, a, b, 1.0f, c);
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) C[(m0 + r) * s.ldc + n0 + j] = narrow<TC>(c[r * cols + j]);
    }
  };
  // Inside any parallel region (even a one-thread team, where omp_in_parallel()
  // is false) the calling thread runs the tiles alone, in its own slot.
  if (omp_get_level() > 0) {
    for (int64_t i = 0; i < row_tiles * col_tiles; ++i) run_tile(i);
  } else {
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < row_tiles * col_tiles; ++i) run_tile(i);
  }
}

template <typename W, typename TA, typename TB, typename TC>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, W alpha, const TA* A, int64_t lda, const TB* B, int64_t ldb, W beta,
          TC* C, int64_t ldc, Workspace<W>& workspace) {
  const GemmShape shape{trans_a, trans_b, M, N, K, lda, ldb, ldc};
  if constexpr (std::is_same_v<TA, W> && std::is_same_v<TB, W> && std::is_same_v<TC, W>) {
    blas_gemm(shape, alpha, A, B, beta, C);
  } else {
    static_assert(std::is_same_v<W, float>, "16-bit GEMMs compute in fp32");
    tiled_gemm(shape, alpha, A, B, beta, C, workspace);
  }
}

}  // namespace tessera::engine::cpu
