#include "tessera/engine/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "tessera/planner/text_util.h"

namespace tessera::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLockName = ".tessera.lock";
constexpr const char* kPointerName = "checkpoint";
constexpr const char* kCheckpointsName = "checkpoints";

std::string step_directory_name(int64_t step) {
  char name[40];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

Error io_error(const std::string& what, const std::string& path, int error_number) {
  return make_error(ErrorCode::io_error, what + " '" + path + "': " + std::strerror(error_number));
}

// Replaces (or creates) the symbolic link `link` so that it points at `target`,
// atomically: a new link under a temporary name, renamed over the old one.
Status replace_link(const std::string& link, const std::string& target) {
  const std::string temporary = link + ".tmp-" + std::to_string(::getpid());
  std::remove(temporary.c_str());
  if (::symlink(target.c_str(), temporary.c_str()) != 0) return io_error("cannot create the link", temporary, errno);
  if (std::rename(temporary.c_str(), link.c_str()) != 0) {
    const int error_number = errno;
    std::remove(temporary.c_str());
    return io_error("cannot replace", link, error_number);
  }
  return Status::success();
}

// The pid written into a lock file by its holder, or "unknown". The holder
// writes it just after taking the lock, so an empty file is read again for a
// moment before giving up.
std::string lock_holder(int fd) {
  for (int attempt = 0; attempt < 50; ++attempt) {
    char text[32] = {};
    const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
    std::string pid = got > 0 ? std::string(text, static_cast<size_t>(got)) : "";
    if (!pid.empty() && pid.back() == '\n') {
      pid.pop_back();
      if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos) return pid;
    }
    ::usleep(10'000);
  }
  return "unknown";
}

Result<int> take_lock(const std::string& dir) {
  const std::string path = dir + "/" + kLockName;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("--out: cannot write in", dir, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error_number = errno;
    const std::string holder = lock_holder(fd);
    ::close(fd);
    if (error_number == EWOULDBLOCK) {
      return make_error(ErrorCode::invalid_argument, "--out: " + dir + " is in use by another tessera train (pid " + holder +
                                                         "); wait for it to finish or choose another --out");
    }
    return io_error("--out: cannot lock", path, error_number);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()) || ::fsync(fd) != 0) {
    const int error_number = errno;
    ::close(fd);
    return io_error("--out: cannot write in (disk full or read-only?)", dir, error_number);
  }
  return fd;
}

}  // namespace

Result<RunDirectory> RunDirectory::open(const std::string& path) {
  if (path.empty()) return make_error(ErrorCode::invalid_argument, "--out must name a directory for the checkpoint and metrics, e.g. --out run");
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {
    return make_error(ErrorCode::invalid_argument, "--out: '" + path + "' exists and is not a directory");
  }
  fs::create_directories(path, ec);
  if (ec) return make_error(ErrorCode::io_error, "--out: cannot create '" + path + "': " + ec.message());
  auto lock = take_lock(path);
  if (!lock) return lock.error();
  RunDirectory dir(path, lock.value());
  fs::create_directories(path + "/" + kCheckpointsName, ec);
  if (ec) return make_error(ErrorCode::io_error, "--out: cannot create '" + path + "/" + kCheckpointsName + "': " + ec.message());
  if (Status s = dir.remove_leftovers(); !s) return s.error();
  return dir;
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept : path_(std::move(other.path_)), lock_fd_(std::exchange(other.lock_fd_, -1)) {}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

Result<std::string> RunDirectory::committed_target() const {
  const std::string pointer = path_ + "/" + kPointerName;
  struct stat info {};
  if (::lstat(pointer.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::string();
    return io_error("cannot inspect", pointer, errno);
  }
  if (!S_ISLNK(info.st_mode)) {
    return make_error(ErrorCode::invalid_argument, pointer + " is not the link tessera writes (it points at the committed checkpoint); move it away");
  }
  char target[256] = {};
  const ssize_t length = ::readlink(pointer.c_str(), target, sizeof target - 1);
  if (length < 0) return io_error("cannot read the link", pointer, errno);
  const std::string text(target, static_cast<size_t>(length));
  const std::string prefix = std::string(kCheckpointsName) + "/step-";
  if (!text.starts_with(prefix) || text.size() == prefix.size() || text.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
    return make_error(ErrorCode::invalid_argument, pointer + " points at '" + text + "', not at one of " + path_ + "/checkpoints/step-N");
  }
  return text;
}

bool RunDirectory::holds_checkpoint() const {
  std::error_code ec;
  auto target = committed_target();
  if (!target || !target->empty()) return true;
  // Checkpoints from before manifests: the two files at the top, no link.
  return fs::exists(fs::symlink_status(path_ + "/model.safetensors", ec)) || fs::exists(fs::symlink_status(path_ + "/optimizer.safetensors", ec));
}

Result<std::optional<CommittedCheckpoint>> RunDirectory::committed() const {
  auto target = committed_target();
  if (!target) return target.error();
  if (target->empty()) return std::optional<CommittedCheckpoint>();
  CommittedCheckpoint checkpoint;
  checkpoint.directory = path_ + "/" + target.value();
  const std::string manifest_path = checkpoint.file(kManifestName);
  auto text = planner::read_text_file(manifest_path, "--resume", kMaxManifestBytes);  // bounded, regular files only
  if (!text) return text.error();
  auto manifest = parse_manifest(text.value(), manifest_path);
  if (!manifest) return manifest.error();
  if (step_directory_name(manifest->step) != fs::path(target.value()).filename().string()) {
    return make_error(ErrorCode::parse_error, manifest_path + " is for step " + std::to_string(manifest->step) + ", not for the directory it is in");
  }
  for (const CheckpointFile& expected : manifest->files) {
    auto opened = ReadOnlyFile::open(checkpoint.file(expected.name), "--resume");
    if (!opened) return opened.error();
    auto digest = opened->digest();
    if (!digest) return digest.error();
    if (digest->bytes != expected.digest.bytes || digest->crc32 != expected.digest.crc32) {
      return make_error(ErrorCode::parse_error, "--resume: " + checkpoint.file(expected.name) + " is damaged (" + std::to_string(digest->bytes) +
                                                    " bytes, CRC-32 " + digest->crc32 + "; the manifest says " + std::to_string(expected.digest.bytes) +
                                                    " bytes, CRC-32 " + expected.digest.crc32 + "); this checkpoint cannot be resumed");
    }
  }
  checkpoint.manifest = std::move(manifest).value();
  return std::optional<CommittedCheckpoint>(std::move(checkpoint));
}

Status RunDirectory::remove_leftovers() const {
  auto target = committed_target();
  if (!target) return target.error();
  const std::string keep = target->empty() ? "" : fs::path(target.value()).filename().string();
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(path_ + "/" + kCheckpointsName, ec)) {
    if (entry.path().filename() != keep) fs::remove_all(entry.path(), ec);  // staging, or superseded
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(path_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) fs::remove(entry.path(), ec);  // a link or file being replaced when a run died
  }
  return Status::success();
}

std::string RunDirectory::checkpoint_path(const std::string& run_directory, int64_t step) {
  return run_directory + "/" + kCheckpointsName + "/" + step_directory_name(step);
}

std::string RunDirectory::staging_path(const std::string& run_directory, int64_t step) {
  return run_directory + "/" + kCheckpointsName + "/.staging-" + step_directory_name(step);
}

Result<CheckpointStaging> RunDirectory::stage(int64_t step) {
  CheckpointStaging staging{step, staging_path(path_, step)};
  std::error_code ec;
  fs::remove_all(staging.directory, ec);
  if (!fs::create_directory(staging.directory, ec)) {
    return make_error(ErrorCode::io_error, "cannot create '" + staging.directory + "': " + (ec ? ec.message() : "it exists"));
  }
  return staging;
}

Status RunDirectory::commit(const CheckpointStaging& staging, const CheckpointManifest& manifest, const std::vector<std::string>& top_level_links) {
  if (auto written = write_new_file(staging.directory + "/" + kManifestName, manifest_to_json(manifest)); !written) return written.error();
  if (Status s = fsync_directory(staging.directory); !s) return s;
  auto previous = committed_target();
  if (!previous) return previous.error();
  const std::string name = step_directory_name(staging.step);
  const std::string relative = std::string(kCheckpointsName) + "/" + name;
  TESSERA_CHECK(previous.value() != relative, "a step is committed once");
  std::error_code ec;
  fs::remove_all(path_ + "/" + relative, ec);  // an uncommitted copy of this step
  if (std::rename(staging.directory.c_str(), (path_ + "/" + relative).c_str()) != 0) return io_error("cannot commit", path_ + "/" + relative, errno);
  if (Status s = fsync_directory(path_ + "/" + kCheckpointsName); !s) return s;
  if (Status s = replace_link(path_ + "/" + kPointerName, relative); !s) return s;  // the commit
  if (Status s = fsync_directory(path_); !s) return s;
  for (const std::string& file : top_level_links) {
    if (Status s = replace_link(path_ + "/" + file, std::string(kPointerName) + "/" + file); !s) return s;
  }
  if (!previous->empty()) fs::remove_all(path_ + "/" + previous.value(), ec);
  return Status::success();
}

}  // namespace tessera::engine
