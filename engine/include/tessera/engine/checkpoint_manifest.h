// The manifest of a checkpoint: written last into the checkpoint's directory,
// it names the step, the run the checkpoint belongs to, every file with its
// size and CRC-32, and the settings that define what the run computes (so that
// a resume with other settings is caught). A checkpoint without a manifest that
// matches its files is not a checkpoint.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/file_io.h"
#include "tessera/planner/status.h"

namespace tessera::engine {

struct CheckpointFile {
  std::string name;  // inside the checkpoint's directory
  FileDigest digest;
};

// One setting that changes what a run computes, with the option that sets it.
struct RunSetting {
  std::string key;     // "precision"
  std::string option;  // "--precision", for messages
  std::string value;   // "bf16"
};

struct CheckpointManifest {
  int64_t step = 0;
  std::string run_id;  // 32 hex digits, chosen when the run started; kept across resumes
  std::vector<CheckpointFile> files;
  std::vector<RunSetting> settings;
};

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr int64_t kMaxManifestBytes = 1 << 20;

std::string manifest_to_json(const CheckpointManifest& manifest);
Result<CheckpointManifest> parse_manifest(std::string_view text, const std::string& path);

// The settings that differ, as "--precision: bf16 in the checkpoint, fp32 now";
// a setting only one side has counts as changed.
std::vector<std::string> changed_settings(const std::vector<RunSetting>& saved, const std::vector<RunSetting>& now);

// A new run identity: 128 random bits as hex.
std::string new_run_id();

}  // namespace tessera::engine
