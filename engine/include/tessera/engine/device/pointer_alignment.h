// How strictly a device buffer is aligned, for cuBLASLt's algorithm choice.
// cuBLASLt's heuristic assumes every matrix pointer is 256-byte aligned
// unless told otherwise (cublasLt.h, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
// .. _D_BYTES, "default: 256"), and may pick an algorithm that needs it. The
// GPU step's GEMMs read and write parameters and gradients at flat offsets
// (a tensor-parallel part's, a Gemini chunk's, a ZeRO-2 bucket's placements)
// that are often only 2-byte aligned, so each call states its pointers' real
// alignment, as PyTorch does (aten/src/ATen/cuda/CUDABlas.cpp, _getAlignment).
#pragma once

#include <cstdint>

namespace tessera::engine {

// The largest power of two that divides `address`, at most `most` bytes (a power of two).
constexpr uint32_t pointer_alignment(uintptr_t address, uint32_t most = 256) {
  uint32_t alignment = 1;
  while (alignment < most && address % (uintptr_t{alignment} * 2) == 0) alignment *= 2;
  return alignment;
}

}  // namespace tessera::engine
