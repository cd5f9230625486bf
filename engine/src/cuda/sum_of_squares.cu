// The two launches of the sum of squares (kernels/sum_of_squares.h).
#include "tessera/engine/cuda/sum_of_squares.h"

#include "device_context.cuh"
#include "tessera/engine/half.h"
#include "tessera/engine/kernels/sum_of_squares.h"

namespace tessera::engine::cuda {
namespace {

template <typename G>
__global__ void squares_partials_kernel(double* partials, const G* grads, int64_t n, double unscale) {
  DeviceContext ctx;
  kernels::squares_partials_body(ctx, partials, grads, n, unscale);
}

__global__ void squares_total_kernel(double* sum_of_squares, int32_t* overflow, const double* partials, int64_t chunks) {
  DeviceContext ctx;
  kernels::squares_total_body(ctx, sum_of_squares, overflow, partials, chunks);
}

}  // namespace

size_t sum_of_squares_workspace_bytes(int64_t n) { return static_cast<size_t>(kernels::squares_chunks(n)) * sizeof(double); }

template <typename G>
cudaError_t sum_of_squares(double* sum_of_squares, int32_t* overflow, const G* grads, int64_t n, double unscale, void* workspace, cudaStream_t stream) {
  auto* partials = static_cast<double*>(workspace);
  const cudaError_t error = launch(squares_partials_kernel<G>, kernels::squares_partials_shape(n), stream, partials, grads, n, unscale);
  return error != cudaSuccess ? error
                              : launch(squares_total_kernel, kernels::squares_total_shape(), stream, sum_of_squares, overflow,
                                       static_cast<const double*>(partials), kernels::squares_chunks(n));
}

template cudaError_t sum_of_squares<float>(double*, int32_t*, const float*, int64_t, double, void*, cudaStream_t);
template cudaError_t sum_of_squares<bf16>(double*, int32_t*, const bf16*, int64_t, double, void*, cudaStream_t);
template cudaError_t sum_of_squares<fp16>(double*, int32_t*, const fp16*, int64_t, double, void*, cudaStream_t);

}  // namespace tessera::engine::cuda
