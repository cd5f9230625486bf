// Row-major GEMM on the CPU through OpenBLAS (cblas_sgemm / cblas_dgemm):
// C (M, N) = alpha · op(A) · op(B) + beta · C. Overloaded on float and double so
// that the ops run in float for training and in double for gradient checks.
#pragma once

#include <cblas.h>

#include <cstdint>

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

inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                 int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

inline void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda, const double* B,
                 int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
              static_cast<int>(K), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

}  // namespace tessera::engine::cpu
