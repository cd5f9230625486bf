// libFuzzer target: arbitrary bytes as a Hugging Face config.json.
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_model_config_once(data, size);
  return 0;
}
