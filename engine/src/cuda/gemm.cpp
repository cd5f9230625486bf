#include "tessera/engine/cuda/gemm.h"

#include <memory>
#include <type_traits>

#include "tessera/engine/device/pointer_alignment.h"
#include "tessera/engine/half.h"

namespace tessera::engine::cuda {
namespace {

template <typename T>
cudaDataType_t data_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  if constexpr (std::is_same_v<T, bf16>) return CUDA_R_16BF;
  return CUDA_R_16F;
}

std::string failed(const char* what, cublasStatus_t status) {
  return std::string(what) + " failed: " + cublasLtGetStatusString(status);
}

// Owners of the descriptors one call creates.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() { if (desc != nullptr) cublasLtMatmulDescDestroy(desc); }
};
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() { if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout); }
};
struct Preference {
  cublasLtMatmulPreference_t preference = nullptr;
  ~Preference() { if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference); }
};

}  // namespace

Gemm::Gemm() {
  if (cublasStatus_t s = cublasLtCreate(&handle_); s != CUBLAS_STATUS_SUCCESS) {
    error_ = failed("cublasLtCreate", s);
    return;
  }
  if (cudaError_t e = cudaMalloc(&workspace_, workspace_bytes_); e != cudaSuccess) {
    error_ = std::string("cudaMalloc of the cuBLASLt workspace failed: ") + cudaGetErrorString(e);
    workspace_ = nullptr;
  }
}

Gemm::~Gemm() {
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

template <typename T>
std::string Gemm::run(const GemmCall& c, const T* A, const T* B, T* C, const T* bias, cudaStream_t stream) {
  if (!error_.empty()) return error_;
  if (c.M == 0 || c.N == 0) return {};
  const cudaDataType_t type = data_type<T>();
  // Column-major view: m = N, n = M; the first operand is B, the second A.
  const cublasOperation_t op_first = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto m = static_cast<uint64_t>(c.N), n = static_cast<uint64_t>(c.M), k = static_cast<uint64_t>(c.K);
  MatmulDesc desc;
  if (auto s = cublasLtMatmulDescCreate(&desc.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F); s != CUBLAS_STATUS_SUCCESS) return failed("cublasLtMatmulDescCreate", s);
  cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first);
  cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second);
  if (c.epilogue != GemmEpilogue::none) {
    const cublasLtEpilogue_t epilogue = c.epilogue == GemmEpilogue::bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof type);
  }
  // Each operand as stored: a transposed one holds its rows as columns.
  Layout first, second, out;
  const auto stored = [](bool transposed, uint64_t rows, uint64_t cols) { return transposed ? std::pair{cols, rows} : std::pair{rows, cols}; };
  const auto [first_rows, first_cols] = stored(c.trans_b, m, k);
  const auto [second_rows, second_cols] = stored(c.trans_a, k, n);
  if (auto s = cublasLtMatrixLayoutCreate(&first.layout, type, first_rows, first_cols, c.ldb); s != CUBLAS_STATUS_SUCCESS) return failed("layout of B", s);
  if (auto s = cublasLtMatrixLayoutCreate(&second.layout, type, second_rows, second_cols, c.lda); s != CUBLAS_STATUS_SUCCESS) return failed("layout of A", s);
  if (auto s = cublasLtMatrixLayoutCreate(&out.layout, type, m, n, c.ldc); s != CUBLAS_STATUS_SUCCESS) return failed("layout of C", s);
  Preference preference;
  cublasLtMatmulPreferenceCreate(&preference.preference);
  cublasLtMatmulPreferenceSetAttribute(preference.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_, sizeof workspace_bytes_);
  // The pointers' real alignment (device/pointer_alignment.h): the heuristic otherwise assumes 256 bytes.
  // cuBLASLt's A is the row-major B here, its B our A, its C and D our C.
  const uint32_t alignments[] = {pointer_alignment(reinterpret_cast<uintptr_t>(B)), pointer_alignment(reinterpret_cast<uintptr_t>(A)),
                                 pointer_alignment(reinterpret_cast<uintptr_t>(C)), pointer_alignment(reinterpret_cast<uintptr_t>(C))};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                                       CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (size_t i = 0; i < 4; ++i) {
    cublasLtMatmulPreferenceSetAttribute(preference.preference, alignment_attributes[i], &alignments[i], sizeof alignments[i]);
  }
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (auto s = cublasLtMatmulAlgoGetHeuristic(handle_, desc.desc, first.layout, second.layout, out.layout, out.layout, preference.preference, 1,
                                              &heuristic, &found);
      s != CUBLAS_STATUS_SUCCESS || found == 0) {
    return s != CUBLAS_STATUS_SUCCESS ? failed("cublasLtMatmulAlgoGetHeuristic", s) : std::string("cuBLASLt has no algorithm for this GEMM");
  }
  if (auto s = cublasLtMatmul(handle_, desc.desc, &c.alpha, B, first.layout, A, second.layout, &c.beta, C, out.layout, C, out.layout, &heuristic.algo,
                              workspace_, workspace_bytes_, stream);
      s != CUBLAS_STATUS_SUCCESS) {
    return failed("cublasLtMatmul", s);
  }
  return {};
}

template std::string Gemm::run(const GemmCall&, const float*, const float*, float*, const float*, cudaStream_t);
template std::string Gemm::run(const GemmCall&, const bf16*, const bf16*, bf16*, const bf16*, cudaStream_t);
template std::string Gemm::run(const GemmCall&, const fp16*, const fp16*, fp16*, const fp16*, cudaStream_t);

}  // namespace tessera::engine::cuda
