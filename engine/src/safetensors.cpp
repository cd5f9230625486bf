#include "tessera/engine/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace tessera::engine {
namespace {

using nlohmann::json;

// The reference implementation refuses larger headers (huggingface/safetensors,
// safetensors/src/tensor.rs: MAX_HEADER_SIZE = 100_000_000); so do we, before
// reading one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

uint64_t read_length(std::string_view head) {
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(head[static_cast<size_t>(i)])) << (8 * i);
  return length;
}

std::string header_bytes(const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  int64_t offset = 0;
  for (const TensorView& t : tensors) {
    const int64_t bytes = numel(t.shape) * 4;
    header[t.name] = json{{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", json::array({offset, offset + bytes})}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the reference writer does
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));  // little-endian
  return out + text;
}

// One entry of the header: F32, a shape whose bytes match its offsets.
Result<SafetensorsEntry> parse_entry(const std::string& name, const json& entry, uint64_t data_bytes, const std::string& path) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' lacks dtype, shape or data_offsets");
  }
  if (entry["dtype"] != "F32") return make_error(ErrorCode::unsupported, path + ": tensor '" + name + "' is not F32");
  const json& shape = entry["shape"];
  const json& offsets = entry["data_offsets"];
  if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has a malformed shape or data_offsets");
  }
  SafetensorsEntry out;
  uint64_t count = 1;
  for (const json& d : shape) {
    // After a zero dimension the count stays 0 and bounds nothing: each dimension must still fit the int64 shape.
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ||
        (d.get<uint64_t>() > 0 && count > data_bytes / 4 / d.get<uint64_t>())) {
      return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has an impossible shape");
    }
    count *= d.get<uint64_t>();
    out.shape.push_back(d.get<int64_t>());
  }
  out.begin = offsets[0].get<uint64_t>();
  out.end = offsets[1].get<uint64_t>();
  if (out.begin > out.end || out.end > data_bytes || out.end - out.begin != count * 4) {
    return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has inconsistent data_offsets");
  }
  return out;
}

// The tensors must tile the data section exactly: no gaps, no overlaps, no
// trailing bytes (the reference loader's validation, safetensors/src/tensor.rs).
Status check_tiling(const SafetensorsIndex& index, uint64_t data_bytes, const std::string& path) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : index.tensors) ranges.emplace_back(entry.begin, entry.end);
  std::sort(ranges.begin(), ranges.end());
  uint64_t expected = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != expected) return make_error(ErrorCode::parse_error, path + ": tensors overlap or leave gaps in the data");
    expected = end;
  }
  if (expected != data_bytes) return make_error(ErrorCode::parse_error, path + ": the data section holds bytes no tensor names (truncated or padded?)");
  return Status::success();
}

}  // namespace

Result<FileDigest> write_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
  const std::string head = header_bytes(tensors, metadata);
  return replace_file_atomically(path, "checkpoint", [&](DurableWriter& writer) -> Status {
    if (Status s = writer.write(head.data(), head.size()); !s) return s;
    for (const TensorView& t : tensors) {
      if (Status s = writer.write(t.data, static_cast<size_t>(numel(t.shape)) * 4); !s) return s;
    }
    return Status::success();
  });
}

Result<SafetensorsIndex> parse_safetensors_index(std::string_view head, uint64_t file_bytes, const std::string& path) {
  if (head.size() < 8 || file_bytes < 8) return make_error(ErrorCode::parse_error, path + ": too short for a safetensors file");
  const uint64_t length = read_length(head);
  if (length > kMaxHeaderBytes) return make_error(ErrorCode::parse_error, path + ": header length over 100 MB (not a safetensors file?)");
  if (length > file_bytes - 8 || length > head.size() - 8) return make_error(ErrorCode::parse_error, path + ": header length runs past the end of the file");
  json header;
  try {
    header = json::parse(head.substr(8, length));
  } catch (const json::exception&) {
    return make_error(ErrorCode::parse_error, path + ": the safetensors header is not valid JSON");
  }
  if (!header.is_object()) return make_error(ErrorCode::parse_error, path + ": the safetensors header is not a JSON object");
  SafetensorsIndex index;
  index.data_start = 8 + length;
  const uint64_t data_bytes = file_bytes - index.data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return make_error(ErrorCode::parse_error, path + ": __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return make_error(ErrorCode::parse_error, path + ": metadata '" + key + "' is not a string");
        index.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto parsed = parse_entry(name, entry, data_bytes, path);
    if (!parsed) return parsed.error();
    index.tensors.emplace(name, std::move(parsed).value());
  }
  if (Status s = check_tiling(index, data_bytes, path); !s) return s.error();
  return index;
}

Result<SafetensorsReader> SafetensorsReader::open(const std::string& path) {
  auto file = ReadOnlyFile::open(path, "checkpoint");
  if (!file) return file.error();
  const int64_t size = file->size();
  std::string head(8, '\0');
  if (size < 8) return make_error(ErrorCode::parse_error, path + ": too short for a safetensors file");
  if (Status s = file->read_at(0, head.data(), 8); !s) return s.error();
  const uint64_t length = read_length(head);
  if (length <= kMaxHeaderBytes && length <= static_cast<uint64_t>(size) - 8) {
    head.resize(8 + length);
    if (Status s = file->read_at(8, head.data() + 8, length); !s) return s.error();
  }
  auto index = parse_safetensors_index(head, static_cast<uint64_t>(size), path);
  if (!index) return index.error();
  return SafetensorsReader(std::move(file).value(), std::move(index).value());
}

Status SafetensorsReader::read(const std::string& name, const std::vector<int64_t>& shape, float* into) const {
  const std::string& path = file_.path();
  auto it = index_.tensors.find(name);
  if (it == index_.tensors.end()) return make_error(ErrorCode::parse_error, path + ": missing tensor '" + name + "' (a checkpoint of another model?)");
  if (it->second.shape != shape) return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has another shape than the model's");
  return file_.read_at(static_cast<int64_t>(index_.data_start + it->second.begin), into, it->second.end - it->second.begin);
}

Status SafetensorsReader::read_part(const std::string& name, const std::vector<int64_t>& shape, int64_t first, int64_t count, float* into) const {
  const std::string& path = file_.path();
  auto it = index_.tensors.find(name);
  if (it == index_.tensors.end()) return make_error(ErrorCode::parse_error, path + ": missing tensor '" + name + "' (a checkpoint of another model?)");
  if (it->second.shape != shape) return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has another shape than the model's");
  if (first < 0 || count < 0 || first + count > numel(shape)) {
    return make_error(ErrorCode::parse_error, path + ": elements beyond tensor '" + name + "' were asked for");
  }
  return file_.read_at(static_cast<int64_t>(index_.data_start + it->second.begin) + first * 4, into, static_cast<uint64_t>(count) * 4);
}

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  auto reader = SafetensorsReader::open(path);
  if (!reader) return reader.error();
  SafetensorsFile file;
  file.metadata = reader->metadata();
  for (const auto& [name, entry] : reader->index().tensors) {
    LoadedTensor t{entry.shape, std::vector<float>(static_cast<size_t>(numel(entry.shape)))};
    if (Status s = reader->read(name, entry.shape, t.data.data()); !s) return s.error();
    file.tensors.emplace(name, std::move(t));
  }
  return file;
}

Result<SafetensorsFile> parse_safetensors(std::string_view bytes, const std::string& path) {
  auto index = parse_safetensors_index(bytes, bytes.size(), path);
  if (!index) return index.error();
  SafetensorsFile file;
  file.metadata = index->metadata;
  for (const auto& [name, entry] : index->tensors) {
    LoadedTensor t{entry.shape, std::vector<float>(static_cast<size_t>(numel(entry.shape)))};
    // An empty tensor's vector has no buffer: memcpy must not see its null pointer.
    if (entry.end > entry.begin) std::memcpy(t.data.data(), bytes.data() + index->data_start + entry.begin, entry.end - entry.begin);
    file.tensors.emplace(name, std::move(t));
  }
  return file;
}

}  // namespace tessera::engine
