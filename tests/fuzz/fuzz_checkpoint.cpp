// libFuzzer target: arbitrary bytes as a checkpoint's files (safetensors, manifest).
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_checkpoint_once(data, size);
  return 0;
}
