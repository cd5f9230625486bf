// Entry points shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp) and the
// corpus replay test (tests/cli/fuzz_corpus_test.cpp). Each takes arbitrary
// bytes and must return normally for every input: an error Result is fine; a
// crash, sanitizer report, uncaught exception or hang is a bug. Neither writes
// files nor reads anything but the shipped (embedded) models and GPUs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::fuzz {

// The bytes as a Hugging Face config.json: parse_model_config, make_model and,
// for a model cheap enough to estimate, estimate_memory on h100-80g with a
// default request, rendered in every report format.
void fuzz_model_config_once(const uint8_t* data, size_t size);

// The bytes as arguments: split on '\n' and '\0'; a final separator adds no
// empty argument ("a\nb\n" is {"a", "b"}, "a\n\nb" is {"a", "", "b"}).
std::vector<std::string> split_arguments(const uint8_t* data, size_t size);

// The bytes as `tessera estimate` arguments, one per line ('\n' or '\0'
// separated): parse_estimate_arguments and, when --model and --gpu name shipped
// entries, estimate_memory rendered as a table and as JSON.
void fuzz_estimate_options_once(const uint8_t* data, size_t size);

// The bytes as a plan.json (hand-edited plan files are user input):
// parse_plan_file and, when it names a shipped model and GPU, every export of
// its first plans.
void fuzz_plan_file_once(const uint8_t* data, size_t size);

// The bytes as a checkpoint's files: a safetensors file (header, shapes,
// offsets, every tensor read) and a checkpoint manifest.
void fuzz_checkpoint_once(const uint8_t* data, size_t size);

// The bytes as an llm.c token shard (`tessera train --data x.bin`).
void fuzz_token_shard_once(const uint8_t* data, size_t size);

// The bytes as the metrics.json `tessera compare` reads, compared with itself.
void fuzz_metrics_file_once(const uint8_t* data, size_t size);

}  // namespace tessera::fuzz
