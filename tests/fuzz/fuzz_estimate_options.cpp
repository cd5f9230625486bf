// libFuzzer target: arbitrary bytes as `tessera estimate` arguments, one per line.
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_estimate_options_once(data, size);
  return 0;
}
