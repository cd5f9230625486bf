// A training run's output directory and the protocol that keeps its checkpoint
// whole. Layout (DIR is --out):
//
//   DIR/.tessera.lock               held (flock) by the one process writing DIR; holds its pid
//   DIR/checkpoints/step-00000012/  one complete checkpoint: its files and manifest.json
//   DIR/checkpoint -> checkpoints/step-00000012      the committed checkpoint
//   DIR/model.safetensors -> checkpoint/model.safetensors  (and the optimizer's, for tools
//                                     that expect the files at the top, like transformers)
//
// A save writes every file into a fresh staging directory, writes the manifest
// (sizes and CRC-32s) last, renames the directory into place and then swaps the
// `checkpoint` link with one atomic rename: that rename is the commit. Until it
// happens the previous checkpoint stays committed and untouched; after it, the
// previous one is removed. A crash at any point leaves either the old or the
// new checkpoint committed, never a mix; what it left half-written is removed
// the next time the directory is opened. Resuming verifies the manifest and
// every file's checksum before anything is loaded.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/engine/checkpoint_manifest.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

// A checkpoint being written: files go into `directory` until commit.
struct CheckpointStaging {
  int64_t step = 0;
  std::string directory;
};

// The committed checkpoint, verified.
struct CommittedCheckpoint {
  CheckpointManifest manifest;
  std::string directory;  // DIR/checkpoints/step-...
  std::string file(const std::string& name) const { return directory + "/" + name; }
};

class RunDirectory {
 public:
  // Creates DIR if needed, takes its lock (a second writer gets one line
  // naming the holder's pid), checks that it can write there, and removes
  // what an interrupted save left behind.
  static Result<RunDirectory> open(const std::string& path);
  RunDirectory(RunDirectory&& other) noexcept;
  RunDirectory& operator=(RunDirectory&&) = delete;
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;
  ~RunDirectory();  // releases the lock

  const std::string& path() const { return path_; }

  // The committed checkpoint after checking its manifest and every file's
  // size and CRC-32; nullopt when DIR holds none. An error says what is wrong.
  Result<std::optional<CommittedCheckpoint>> committed() const;
  // Whether DIR holds a checkpoint (committed, or files from before manifests).
  bool holds_checkpoint() const;

  Result<CheckpointStaging> stage(int64_t step);
  // Where stage(step) puts its files: ranks other than 0 write their shards
  // there while rank 0, which holds the directory, stages and commits.
  static std::string staging_path(const std::string& run_directory, int64_t step);
  // Where the checkpoint of `step` is once committed: ranks other than 0 load
  // their shards there after rank 0 has verified it.
  static std::string checkpoint_path(const std::string& run_directory, int64_t step);
  // Writes the manifest into the staging directory and commits it as above.
  // `top_level_links`: files of the checkpoint also linked from DIR.
  Status commit(const CheckpointStaging& staging, const CheckpointManifest& manifest, const std::vector<std::string>& top_level_links);

 private:
  RunDirectory(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  Result<std::string> committed_target() const;  // "checkpoints/step-..." or "" when none
  Status remove_leftovers() const;

  std::string path_;
  int lock_fd_ = -1;
};

}  // namespace tessera::engine
