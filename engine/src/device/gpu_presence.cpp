#include "tessera/engine/device/gpu_presence.h"

#if defined(TESSERA_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace tessera::engine {

GpuPresence cuda_device_presence() {
#if defined(TESSERA_HAVE_CUDA)
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    // Without any NVIDIA driver the runtime reports an "insufficient" one.
    const std::string why = error == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime" : cudaGetErrorString(error);
    return {false, "no CUDA device is available (" + why + ")"};
  }
  if (count == 0) return {false, "no CUDA device is available (none found)"};
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return {false, "CUDA device 0 does not answer"};
  return {true, std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")", count};
#else
  return {false, "this tessera was built without CUDA (TESSERA_CUDA=OFF)"};
#endif
}

}  // namespace tessera::engine
