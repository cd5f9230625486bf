// How the GPU step's host code turns a CUDA runtime error into the engine's:
// a Status naming what failed (`succeeded`), or, where a constructor cannot
// return one or inside the step's launches, an exception the step reports as
// its one-line error (`made`; gpt_training.cpp catches it).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "tessera/planner/status.h"

namespace tessera::engine::cuda {

inline Status succeeded(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return make_error(ErrorCode::unsupported, std::string(what) + ": " + cudaGetErrorString(error));
}

inline void made(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

}  // namespace tessera::engine::cuda
