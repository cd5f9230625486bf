// Whether this process could train on a CUDA device: the device it would use,
// or one line saying why not (a build without CUDA, no driver, no device), for
// `tessera train --gpu NAME` to say in its refusal.
#pragma once

#include <string>

namespace tessera::engine {

struct GpuPresence {
  bool available = false;
  std::string description;  // device 0: "NVIDIA H100 80GB HBM3 (sm_90)", or why there is none
  int count = 0;            // visible devices (after CUDA_VISIBLE_DEVICES)
};

GpuPresence cuda_device_presence();

}  // namespace tessera::engine
