// Replays the libFuzzer corpora (tests/fuzz/corpus/) through the fuzz entry
// points in the normal test build, so that every input a fuzzer once found
// interesting keeps returning normally, sanitizers or not. The corpora are
// minimized with `-merge=1`; see tests/fuzz/CMakeLists.txt for how to grow them.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../fuzz/fuzz_entries.h"
#include "estimate_options.h"
#include "tessera/engine/checkpoint_manifest.h"
#include "tessera/engine/data.h"
#include "tessera/engine/safetensors.h"
#include "tessera/planner/embedded_data.h"
#include "tessera/planner/measured_run.h"
#include "tessera/planner/model_config.h"
#include "tessera/planner/plan_file.h"
#include "tessera/planner/registry.h"

namespace {

namespace fs = std::filesystem;

struct CorpusFile {
  std::string name;
  std::string bytes;
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(bytes.data()); }
};

// The regular files of one corpus directory, sorted by name; empty when missing.
std::vector<CorpusFile> read_corpus(const std::string& subdirectory) {
  std::vector<CorpusFile> files;
  const fs::path directory = fs::path(TESSERA_FUZZ_CORPUS_DIR) / subdirectory;
  std::error_code ec;
  if (!fs::is_directory(directory, ec)) return files;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files.push_back({entry.path().filename().string(), std::string(std::istreambuf_iterator<char>(in), {})});
  }
  std::sort(files.begin(), files.end(), [](const CorpusFile& a, const CorpusFile& b) { return a.name < b.name; });
  return files;
}

// Replays a corpus through its fuzz entry; returns how many inputs `accepts`
// takes and how many it refuses.
template <typename Accepts>
std::pair<int, int> replay(const std::string& corpus_name, void (*entry)(const uint8_t*, size_t), Accepts accepts) {
  const std::vector<CorpusFile> corpus = read_corpus(corpus_name);
  EXPECT_FALSE(corpus.empty()) << corpus_name;
  int accepted = 0, refused = 0;
  for (const CorpusFile& file : corpus) {
    SCOPED_TRACE(file.name);
    entry(file.data(), file.bytes.size());
    accepts(file) ? ++accepted : ++refused;
  }
  return {accepted, refused};
}

TEST(FuzzCorpus, EveryCorpusIsPresentAndNonEmpty) {
  for (const char* name : {"model_config", "estimate_options", "plan_file", "checkpoint", "token_shard", "metrics_file"}) {
    EXPECT_FALSE(read_corpus(name).empty()) << "no files in " << TESSERA_FUZZ_CORPUS_DIR << "/" << name;
  }
}

TEST(FuzzCorpus, ModelConfigCorpusReplaysAndCoversBothOutcomes) {
  const std::vector<CorpusFile> corpus = read_corpus("model_config");
  ASSERT_FALSE(corpus.empty());
  int accepted = 0, rejected = 0;
  for (const CorpusFile& file : corpus) {
    SCOPED_TRACE(file.name);
    tessera::fuzz::fuzz_model_config_once(file.data(), file.bytes.size());
    const auto config = tessera::planner::parse_model_config(file.bytes, file.name);
    if (config) {
      ++accepted;
    } else {
      ++rejected;
      EXPECT_FALSE(config.error().message.empty());
      EXPECT_EQ(config.error().message.find('\n'), std::string::npos) << config.error().message;
    }
  }
  // A useful corpus holds configs that parse and configs that are rejected.
  EXPECT_GE(accepted, 10);
  EXPECT_GE(rejected, 10);
}

// The seeds kept under their own names: copies of models/*.json.
TEST(FuzzCorpus, ShippedConfigsInTheCorpusParse) {
  int shipped = 0;
  for (const CorpusFile& file : read_corpus("model_config")) {
    if (!file.name.starts_with("shipped-")) continue;
    SCOPED_TRACE(file.name);
    ++shipped;
    const auto config = tessera::planner::parse_model_config(file.bytes, file.name);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_GT(config->num_layers, 0);
    EXPECT_GT(config->hidden_size, 0);
  }
  EXPECT_GE(shipped, 5) << "the corpus should keep the shipped model configs as seeds (shipped-<name>.json)";
}

// The models the binary embeds today, whatever the corpus holds.
TEST(FuzzCorpus, EmbeddedModelsPassTheModelConfigEntry) {
  const auto& files = tessera::planner::embedded_model_files();
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) {
    SCOPED_TRACE(std::string(file.name));
    ASSERT_TRUE(tessera::planner::parse_model_config(file.content, std::string(file.name)).ok());
    tessera::fuzz::fuzz_model_config_once(reinterpret_cast<const uint8_t*>(file.content.data()), file.content.size());
  }
}

TEST(FuzzCorpus, EstimateOptionsCorpusReplaysAndCoversBothOutcomes) {
  const std::vector<CorpusFile> corpus = read_corpus("estimate_options");
  ASSERT_FALSE(corpus.empty());
  const std::vector<std::string> models = tessera::planner::shipped_model_names();
  int parsed = 0, rejected = 0, shipped_model = 0;
  for (const CorpusFile& file : corpus) {
    SCOPED_TRACE(file.name);
    tessera::fuzz::fuzz_estimate_options_once(file.data(), file.bytes.size());
    const auto options = tessera::cli::parse_estimate_arguments(tessera::fuzz::split_arguments(file.data(), file.bytes.size()));
    if (!options) {
      ++rejected;
      EXPECT_FALSE(options.error().message.empty());
      continue;
    }
    ++parsed;
    if (std::find(models.begin(), models.end(), options->model) != models.end()) ++shipped_model;
  }
  EXPECT_GE(parsed, 10);
  EXPECT_GE(rejected, 10);
  EXPECT_GE(shipped_model, 5) << "few corpus entries reach an estimate of a shipped model";
}

TEST(FuzzCorpus, PlanFileCorpusReplaysAndCoversBothOutcomes) {
  const auto [parsed, rejected] = replay("plan_file", tessera::fuzz::fuzz_plan_file_once,
                                         [](const CorpusFile& file) { return tessera::planner::parse_plan_file(file.bytes, file.name).ok(); });
  EXPECT_GE(parsed, 3);
  EXPECT_GE(rejected, 1);
}

// The readers of what a run leaves behind: checkpoint files and manifests,
// token shards, metrics files. Each corpus holds inputs both accepted and refused.
TEST(FuzzCorpus, CheckpointCorpusReplaysAndCoversBothOutcomes) {
  int tensors = 0, manifests = 0, rejected = 0;
  for (const CorpusFile& file : read_corpus("checkpoint")) {
    SCOPED_TRACE(file.name);
    tessera::fuzz::fuzz_checkpoint_once(file.data(), file.bytes.size());
    const bool parsed = tessera::engine::parse_safetensors(file.bytes, file.name).ok();
    const bool manifest = tessera::engine::parse_manifest(file.bytes, file.name).ok();
    tensors += parsed;
    manifests += manifest;
    rejected += !parsed && !manifest;
  }
  EXPECT_GE(tensors, 2);
  EXPECT_GE(manifests, 1);
  EXPECT_GE(rejected, 3);
}

TEST(FuzzCorpus, TokenShardCorpusReplaysAndCoversBothOutcomes) {
  const auto [parsed, rejected] = replay("token_shard", tessera::fuzz::fuzz_token_shard_once,
                                         [](const CorpusFile& file) { return tessera::engine::parse_token_data(file.bytes, true, file.name).ok(); });
  EXPECT_GE(parsed, 1);
  EXPECT_GE(rejected, 3);
}

TEST(FuzzCorpus, MetricsFileCorpusReplaysAndCoversBothOutcomes) {
  const auto [parsed, rejected] = replay("metrics_file", tessera::fuzz::fuzz_metrics_file_once,
                                         [](const CorpusFile& file) { return tessera::planner::parse_measured_run(file.bytes, file.name).ok(); });
  EXPECT_GE(parsed, 1);
  EXPECT_GE(rejected, 2);
}

TEST(FuzzCorpus, ArgumentsSplitOnNewlineAndNul) {
  const std::string text("--model\ngpt2\0--dp\n\n8\n", 20);
  const std::vector<std::string> expected{"--model", "gpt2", "--dp", "", "8"};
  EXPECT_EQ(tessera::fuzz::split_arguments(reinterpret_cast<const uint8_t*>(text.data()), text.size()), expected);
  EXPECT_TRUE(tessera::fuzz::split_arguments(nullptr, 0).empty());
}

}  // namespace
