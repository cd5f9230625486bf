// libFuzzer target: arbitrary bytes as an llm.c token shard.
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::fuzz::fuzz_token_shard_once(data, size);
  return 0;
}
