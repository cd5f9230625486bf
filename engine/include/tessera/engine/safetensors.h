// The safetensors format (huggingface/safetensors, docs "Format"): an 8-byte
// little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data that
// follows; "__metadata__" holds string pairs), then the raw little-endian data.
// Tessera writes and reads F32 tensors only.
//
// Reading is bounded: the header is parsed and checked (shapes against
// offsets, the tensors tiling the data exactly, as the reference loader
// requires) before any tensor is read, and each tensor is read straight into
// its destination, so a checkpoint never needs twice its size in memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/file_io.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // F32, numel = product of shape
};

// Writes PATH atomically (a unique temporary in the same directory, fsync,
// rename, fsync of the directory): a failed write leaves a previous PATH as it was.
Result<FileDigest> write_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata);

struct SafetensorsEntry {
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct SafetensorsIndex {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length
};

// The header of a file of `file_bytes` bytes whose first bytes are `head`
// (at least the 8-byte length and the header it announces).
Result<SafetensorsIndex> parse_safetensors_index(std::string_view head, uint64_t file_bytes, const std::string& path);

// A safetensors file opened for reading tensors one by one.
class SafetensorsReader {
 public:
  static Result<SafetensorsReader> open(const std::string& path);
  const SafetensorsIndex& index() const { return index_; }
  const std::map<std::string, std::string>& metadata() const { return index_.metadata; }
  // Reads tensor `name`, which must have exactly `shape`, into `into`.
  Status read(const std::string& name, const std::vector<int64_t>& shape, float* into) const;
  // Reads elements [first, first + count) of tensor `name` (of exactly `shape`):
  // a rank's piece of a tensor, without reading the rest.
  Status read_part(const std::string& name, const std::vector<int64_t>& shape, int64_t first, int64_t count, float* into) const;

 private:
  SafetensorsReader(ReadOnlyFile file, SafetensorsIndex index) : file_(std::move(file)), index_(std::move(index)) {}
  ReadOnlyFile file_;
  SafetensorsIndex index_;
};

struct LoadedTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, LoadedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Every tensor of a file, or of a whole file's bytes in memory.
Result<SafetensorsFile> read_safetensors(const std::string& path);
Result<SafetensorsFile> parse_safetensors(std::string_view bytes, const std::string& path);

}  // namespace tessera::engine
