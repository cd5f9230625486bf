// tessera-cuda-device: the GPU tools/gpu-check runs on, as one tab-separated
// line: name, compute capability, memory in bytes, CUDA driver version. With
// no usable device it prints one line saying why and exits 77 (the
// "skipped" exit status of automake and ctest's SKIP_RETURN_CODE convention).
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s\n", error != cudaSuccess ? cudaGetErrorString(error) : "none found");
    return 77;
  }
  cudaDeviceProp prop{};
  int driver = 0;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaDriverGetVersion(&driver) != cudaSuccess) {
    std::printf("no CUDA device: device 0 does not answer\n");
    return 77;
  }
  std::printf("%s\t%d.%d\t%zu\t%d\n", prop.name, prop.major, prop.minor, prop.totalGlobalMem, driver);
  return 0;
}
