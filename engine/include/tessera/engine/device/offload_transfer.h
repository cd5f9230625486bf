// ZeRO-Offload's transfer buffer on GPUs (src/cuda/zero_offload.h): one
// pinned buffer of the fp32 gradient shard the planner counts on the host
// (device/offload_host_blocks.h, planner/pinned_host_blocks.h), which
// carries the bf16 gradient shard down and the updated bf16 parameters back
// up. The bf16 gradients are copied into its first half and widened in place
// to fp32, as the CPU engine's offload widens them (parallel/data_parallel.h);
// the host optimizer reads them all and then rounds its master weights into
// the buffer's start as bf16 (Optimizer::apply rounds after its last piece),
// which is copied to the device. Plain host code, tested on the CPU.
#pragma once

#include <cstdint>
#include <cstring>

#include "tessera/engine/half.h"

namespace tessera::engine {

// `buffer` holds n bf16 values in its first 2n bytes and has room for 4n:
// afterwards it holds their n fp32 widenings. From the last element down, so
// that element i's four bytes cover only bf16 elements 2i and 2i + 1, which
// are at or after i and already read.
inline void widen_bf16_in_place(void* buffer, int64_t n) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (int64_t i = n - 1; i >= 0; --i) {
    bf16 value;
    std::memcpy(&value, bytes + 2 * i, sizeof value);
    const float wide = widen(value);
    std::memcpy(bytes + 4 * i, &wide, sizeof wide);
  }
}

}  // namespace tessera::engine
