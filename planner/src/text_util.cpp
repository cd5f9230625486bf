#include "tessera/planner/text_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace tessera::planner {
namespace {

// Closes a descriptor on every return path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string size_text(size_t bytes) {
  return bytes % (size_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// Reads up to `size` bytes; fewer where the file shrank since fstat.
Result<std::string> read_up_to(int fd, size_t size, const std::string& where) {
  std::string text(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, text.data() + done, size - done);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ErrorCode::io_error, where + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace

std::string one_line(std::string_view text, size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars));
  for (char ch : text) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto byte = static_cast<unsigned char>(ch);
    out += (byte < 0x20 || byte == 0x7f) ? ' ' : ch;
  }
  return out;
}

std::string format_number(double value) {
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

Result<std::string> read_text_file(const std::string& path, const std::string& field, size_t max_bytes) {
  const std::string quoted = "'" + one_line(path, 200) + "'";
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before fstat could refuse it.
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return make_error(ErrorCode::not_found, field + ": cannot open " + quoted + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return make_error(ErrorCode::io_error, field + ": cannot read " + quoted + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return make_error(ErrorCode::not_found, field + ": " + quoted + " is a directory; give the path of a .json file");
  if (!S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::invalid_argument, field + ": " + quoted + " is not a regular file (" + file_type_name(st.st_mode) +
                                                       "); give the path of a .json file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size > max_bytes) {
    return make_error(ErrorCode::invalid_argument, field + ": " + quoted + " is " + std::to_string(size) + " bytes, more than the " +
                                                       size_text(max_bytes) + " this input may hold; give the path of a .json file");
  }
  return read_up_to(fd.get(), size, field + ": cannot read " + quoted);
}

}  // namespace tessera::planner
