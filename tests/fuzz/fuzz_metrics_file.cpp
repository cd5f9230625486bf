// libFuzzer target: arbitrary bytes as the metrics.json tessera compare reads.
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_metrics_file_once(data, size);
  return 0;
}
