// Files the engine reads and writes, with the guarantees a training run needs:
//  - inputs are opened only when they are regular files (a FIFO would block, a
//    device such as /dev/zero never ends), their size is known before a byte is
//    read, and an I/O error becomes a Status naming the file, never an exception;
//  - outputs are written durably (fsync of the file, then of its directory) and
//    atomically where a file replaces another (a unique temporary, then rename);
//  - every byte written or read through here can be checksummed (CRC-32, zlib).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tessera/planner/status.h"

namespace tessera::engine {

// CRC-32 (ISO-HDLC, as zlib and gzip compute it), fed in pieces.
class Crc32 {
 public:
  void update(const void* data, size_t bytes);
  uint32_t value() const { return value_; }
  std::string hex() const;  // eight lowercase hex digits

 private:
  uint32_t value_ = 0;
};

// A file's size and checksum, as a checkpoint manifest lists it.
struct FileDigest {
  int64_t bytes = 0;
  std::string crc32;  // Crc32::hex()
};

// A regular file opened for reading. Move-only; closes on destruction.
class ReadOnlyFile {
 public:
  // `field` names the input in messages ("--data", "checkpoint").
  static Result<ReadOnlyFile> open(const std::string& path, const std::string& field);
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads exactly `bytes` at `offset`; an error names the file (short read, EIO).
  Status read_at(int64_t offset, void* into, size_t bytes) const;
  // Size and CRC-32 of the whole file, read in pieces.
  Result<FileDigest> digest() const;

 private:
  ReadOnlyFile(int fd, int64_t size, std::string path, std::string field);
  int fd_ = -1;
  int64_t size_ = 0;
  std::string path_, field_;
};

// Writes `pieces` one after another into a new file at `path` (which must not
// exist), fsyncs it, and returns its digest. Used inside a checkpoint's
// staging directory, which is committed as a whole.
class DurableWriter {
 public:
  static Result<DurableWriter> create(const std::string& path);
  DurableWriter(DurableWriter&& other) noexcept;
  DurableWriter& operator=(DurableWriter&&) = delete;
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;
  ~DurableWriter();  // an unfinished file is removed

  Status write(const void* data, size_t bytes);
  // fsync and close; the file is complete.
  Result<FileDigest> finish();

 private:
  DurableWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  Crc32 crc_;
  int64_t bytes_ = 0;
};

// Replaces PATH atomically with a file `write` fills: a unique temporary beside
// it (PATH.tmp-PID-N, so two writers never share one), fsync, rename over PATH,
// fsync of the directory. A failure leaves PATH as it was. Only nothing or a
// regular file at PATH is replaced: a symlink would be replaced rather than
// written through, and a device (/dev/full), FIFO or directory is never what
// was meant. Errors start with `field`, the option or file the path came from.
Result<FileDigest> replace_file_atomically(const std::string& path, const std::string& field, const std::function<Status(DurableWriter&)>& write);

// Writes `text` to a new file at `path` durably (DurableWriter in one call).
Result<FileDigest> write_new_file(const std::string& path, std::string_view text);

// Makes a directory's entries (renames, new files) durable. File systems that
// cannot sync a directory (EINVAL) are taken at their word.
Status fsync_directory(const std::string& directory);

}  // namespace tessera::engine
