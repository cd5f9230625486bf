// The safetensors format (huggingface/safetensors, docs "Format"): an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data that
// follows; "__metadata__" holds string pairs), then the raw little-endian data.
// Files are written atomically: a temporary file in the same directory,
// fsync, rename over the old one, fsync of the directory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/planner/status.h"

namespace tessera::engine {

struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // F32, numel = product of shape
};

Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata);

// The two halves of write_safetensors, for files that must change together (a
// checkpoint's model and optimizer files): stage writes and fsyncs PATH.tmp,
// leaving PATH alone; commit renames each staged file over its path; discard
// removes the staged files.
Status stage_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata);
Status commit_staged(const std::vector<std::string>& paths);
void discard_staged(const std::vector<std::string>& paths);

struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, LoadedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

Result<SafetensorsFile> read_safetensors(const std::string& path);

}  // namespace tessera::engine
