// Which classes of the vocabulary a rank's embedding rows and logit columns
// are: all of them on one rank, a contiguous share of the padded vocabulary
// under tensor parallelism (model/tensor_parallel.h).
#pragma once

#include <cstdint>
#include <limits>

#include "tessera/engine/host_device.h"

namespace tessera::engine::cpu {

// Classes [first_class, first_class + valid); past them, padding.
struct VocabSlice {
  int64_t first_class = 0;
  int64_t valid = std::numeric_limits<int64_t>::max();
  TESSERA_HOST_DEVICE bool owns(int32_t token) const { return token >= first_class && token - first_class < valid; }
};

}  // namespace tessera::engine::cpu
