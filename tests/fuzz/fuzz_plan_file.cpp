// libFuzzer target: arbitrary bytes as a plan.json, parsed and exported.
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_plan_file_once(data, size);
  return 0;
}
