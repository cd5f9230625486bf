// GEMMs on the GPU through cuBLASLt, with the CPU's row-major convention
// (ops/gemm.h): C (M, N) = alpha · op(A) · op(B) + beta · C, A, B and C in the
// same storage type (fp32, bf16 or fp16), accumulated in fp32. The epilogue
// fuses what a linear layer applies to the product: a bias per column of C
// (length N), then optionally GELU (tanh approximation), so that the forward
// of a GPT-2 MLP's first layer is one kernel.
//
// cuBLASLt is column-major; a row-major C = op(A)·op(B) is the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, so the call swaps the operands and keeps each one's
// transpose flag and leading dimension (the same memory read the other way).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace tessera::engine::cuda {

enum class GemmEpilogue { none, bias, bias_gelu };

struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  GemmEpilogue epilogue = GemmEpilogue::none;
};

// One cuBLASLt handle and its workspace (32 MiB: the cuBLAS documentation's
// recommendation for Hopper, cublasSetWorkspace), per device and stream user.
class Gemm {
 public:
  // An empty error() means ready.
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  const std::string& error() const { return error_; }
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // Device pointers; `bias` (N elements of T) where the epilogue has one.
  // Returns an empty string, or what cuBLASLt refused.
  template <typename T>
  std::string run(const GemmCall& call, const T* A, const T* B, T* C, const T* bias, cudaStream_t stream);

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = kWorkspaceBytes;
  std::string error_;
};

}  // namespace tessera::engine::cuda
