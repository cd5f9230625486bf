// Functions marked TESSERA_HOST_DEVICE are compiled for the CPU by the host
// compiler and for both the CPU and the GPU by nvcc, so that the per-element
// arithmetic the CPU tests check is the arithmetic the CUDA kernels run.
#pragma once

#if defined(__CUDACC__)
#define TESSERA_HOST_DEVICE __host__ __device__ inline
#else
#define TESSERA_HOST_DEVICE inline
#endif
