#include "tessera/engine/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <filesystem>
#include <utility>
#include <vector>

#include "tessera/planner/text_util.h"

namespace tessera::engine {
namespace {

Error io_error(const std::string& what, const std::string& path, int error_number) {
  return make_error(ErrorCode::io_error, what + " '" + path + "': " + std::strerror(error_number));
}


}  // namespace

void Crc32::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes uInt lengths
    const auto piece = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    value_ = static_cast<uint32_t>(::crc32(value_, p, piece));
    p += piece;
    bytes -= piece;
  }
}

std::string Crc32::hex() const {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value_);
  return text;
}

Result<ReadOnlyFile> ReadOnlyFile::open(const std::string& path, const std::string& field) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; regular files ignore it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return io_error(field + ": cannot open", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error_number = errno;
    ::close(fd);
    return io_error(field + ": cannot stat", path, error_number);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::invalid_argument, field + ": '" + path + "' is " + planner::file_type_name(info.st_mode) + "; give the path of a regular file");
  }
  return ReadOnlyFile(fd, static_cast<int64_t>(info.st_size), path, field);
}

ReadOnlyFile::ReadOnlyFile(int fd, int64_t size, std::string path, std::string field)
    : fd_(fd), size_(size), path_(std::move(path)), field_(std::move(field)) {}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept { *this = std::move(other); }

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
    field_ = std::move(other.field_);
  }
  return *this;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status ReadOnlyFile::read_at(int64_t offset, void* into, size_t bytes) const {
  auto* p = static_cast<char*>(into);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, p, std::min<size_t>(bytes, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error(field_ + ": cannot read", path_, errno);
    if (got == 0) return make_error(ErrorCode::io_error, field_ + ": '" + path_ + "' ended early (was it truncated while being read?)");
    p += got;
    offset += got;
    bytes -= static_cast<size_t>(got);
  }
  return Status::success();
}

Result<FileDigest> ReadOnlyFile::digest() const {
  std::vector<char> buffer(size_t{4} << 20);
  Crc32 crc;
  for (int64_t offset = 0; offset < size_;) {
    const auto piece = static_cast<size_t>(std::min<int64_t>(size_ - offset, static_cast<int64_t>(buffer.size())));
    if (Status s = read_at(offset, buffer.data(), piece); !s) return s.error();
    crc.update(buffer.data(), piece);
    offset += static_cast<int64_t>(piece);
  }
  return FileDigest{size_, crc.hex()};
}

Result<DurableWriter> DurableWriter::create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // less the umask, as any new file
  if (fd < 0) return io_error("cannot create", path, errno);
  return DurableWriter(fd, path);
}

DurableWriter::DurableWriter(DurableWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)), crc_(other.crc_), bytes_(other.bytes_) {}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::remove(path_.c_str());
  }
}

Status DurableWriter::write(const void* data, size_t bytes) {
  crc_.update(data, bytes);
  bytes_ += static_cast<int64_t>(bytes);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t written = ::write(fd_, p, std::min<size_t>(bytes, 1u << 30));
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return io_error("cannot write (disk full?)", path_, errno);
    p += written;
    bytes -= static_cast<size_t>(written);
  }
  return Status::success();
}

Result<FileDigest> DurableWriter::finish() {
  const bool synced = ::fsync(fd_) == 0;
  const int error_number = errno;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) {
    std::remove(path_.c_str());
    return io_error("cannot write (disk full?)", path_, synced ? errno : error_number);
  }
  return FileDigest{bytes_, crc_.hex()};
}

Result<FileDigest> write_new_file(const std::string& path, std::string_view text) {
  auto writer = DurableWriter::create(path);
  if (!writer) return writer.error();
  if (Status s = writer.value().write(text.data(), text.size()); !s) return s.error();
  return writer.value().finish();
}

Result<FileDigest> replace_file_atomically(const std::string& path, const std::string& field, const std::function<Status(DurableWriter&)>& write) {
  const std::string quoted = "'" + planner::one_line(path, 200) + "'";
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    return make_error(ErrorCode::invalid_argument, field + ": " + quoted + " is " + planner::file_type_name(info.st_mode) +
                                                       "; Tessera only replaces regular files, so give the path of a new or regular file");
  }
  static std::atomic<int> counter{0};
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  auto writer = DurableWriter::create(temporary);
  if (!writer) return make_error(ErrorCode::io_error, field + ": " + writer.error().message);
  if (Status s = write(writer.value()); !s) return make_error(ErrorCode::io_error, field + ": " + s.error().message);
  auto digest = writer.value().finish();
  if (!digest) return make_error(ErrorCode::io_error, field + ": " + digest.error().message);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error_number = errno;
    std::remove(temporary.c_str());
    return io_error(field + ": cannot replace", path, error_number);
  }
  if (Status s = fsync_directory(std::filesystem::path(path).parent_path().string()); !s) return make_error(ErrorCode::io_error, field + ": " + s.error().message);
  return digest;
}

Status fsync_directory(const std::string& directory) {
  const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open directory", directory, errno);
  const bool synced = ::fsync(fd) == 0 || errno == EINVAL;
  const int error_number = errno;
  ::close(fd);
  if (!synced) return io_error("cannot sync directory", directory, error_number);
  return Status::success();
}

}  // namespace tessera::engine
