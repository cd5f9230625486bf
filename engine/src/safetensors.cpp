#include "tessera/engine/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace tessera::engine {
namespace {

using nlohmann::json;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Error io_error(const std::string& what, const std::string& path) {
  return make_error(ErrorCode::io_error, what + " '" + path + "': " + std::strerror(errno));
}

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd, p, bytes);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += written;
    bytes -= static_cast<size_t>(written);
  }
  return true;
}

std::string staged_path(const std::string& path) { return path + ".tmp"; }

}  // namespace

Status stage_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
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
  const uint64_t length = text.size();
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));  // little-endian

  const std::string temporary = staged_path(path);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return io_error("cannot write", temporary);
  bool ok = write_all(fd, length_bytes, 8) && write_all(fd, text.data(), text.size());
  for (const TensorView& t : tensors) ok = ok && write_all(fd, t.data, static_cast<size_t>(numel(t.shape)) * 4);
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    std::remove(temporary.c_str());
    errno = saved;
    return io_error("cannot write (disk full?) the previous checkpoint is kept;", path);
  }
  return Status::success();
}

Status commit_staged(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    const std::string temporary = staged_path(path);
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      const Error error = io_error("cannot replace", path);
      discard_staged(paths);
      return error;
    }
  }
  for (const std::string& path : paths) {
    const std::string directory = std::filesystem::path(path).parent_path().string();
    const int dir_fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);  // make the renames themselves durable
      ::close(dir_fd);
    }
  }
  return Status::success();
}

void discard_staged(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) std::remove(staged_path(path).c_str());
}

Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors, const std::map<std::string, std::string>& metadata) {
  if (Status s = stage_safetensors(path, tensors, metadata); !s) return s;
  return commit_staged({path});
}

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "cannot open checkpoint '" + path + "'");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) return make_error(ErrorCode::parse_error, path + ": too short for a safetensors file");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[static_cast<size_t>(i)])) << (8 * i);
  if (length > bytes.size() - 8) return make_error(ErrorCode::parse_error, path + ": header length runs past the end of the file");
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  } catch (const json::exception&) {
    return make_error(ErrorCode::parse_error, path + ": the safetensors header is not valid JSON");
  }
  SafetensorsFile file;
  const size_t data_start = 8 + length;
  const uint64_t data_bytes = bytes.size() - data_start;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [key, value] : entry.items()) {
          if (!value.is_string()) return make_error(ErrorCode::parse_error, path + ": metadata '" + key + "' is not a string");
          file.metadata[key] = value.get<std::string>();
        }
        continue;
      }
      if (entry.at("dtype") != "F32") return make_error(ErrorCode::unsupported, path + ": tensor '" + name + "' is not F32");
      LoadedTensor t;
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      uint64_t count = 1;
      for (int64_t d : t.shape) {
        if (d < 0 || (d > 0 && count > data_bytes / 4 / static_cast<uint64_t>(d))) {
          return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has an impossible shape");
        }
        count *= static_cast<uint64_t>(d);
      }
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_bytes || offsets[1] - offsets[0] != count * 4) {
        return make_error(ErrorCode::parse_error, path + ": tensor '" + name + "' has inconsistent data_offsets");
      }
      t.data.resize(static_cast<size_t>(count));
      std::memcpy(t.data.data(), bytes.data() + data_start + offsets[0], count * 4);
      file.tensors.emplace(name, std::move(t));
    }
  } catch (const json::exception&) {
    return make_error(ErrorCode::parse_error, path + ": a tensor lacks dtype, shape or data_offsets, or has the wrong types");
  }
  return file;
}

}  // namespace tessera::engine
