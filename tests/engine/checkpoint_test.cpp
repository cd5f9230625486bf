#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "../support/scratch_dir.h"
#include "tessera/engine/flat_checkpoint.h"
#include "tessera/engine/run_checkpoints.h"
#include "tessera/engine/run_directory.h"
#include "tessera/engine/safetensors.h"
#include "tessera/engine/trainer.h"
#include "tessera/planner/registry.h"

namespace tessera::engine {
namespace {

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Safetensors, HeaderIsByteExact) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = scratch.path("header.safetensors");
  const float a[2] = {1.0f, -2.0f};
  const float b[3] = {0.5f, 0.25f, 4.0f};
  ASSERT_TRUE(write_safetensors(path, {{"a", {2}, a}, {"b.weight", {1, 3}, b}}, {{"format", "pt"}}).ok());
  const auto bytes = file_bytes(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(bytes[static_cast<size_t>(i)]) << (8 * i);
  const std::string expected_json =
      R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},"b.weight":{"data_offsets":[8,20],"dtype":"F32","shape":[1,3]}})";
  ASSERT_EQ(length % 8, 0u) << "data starts 8-byte aligned";
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length));
  EXPECT_EQ(header.substr(0, expected_json.size()), expected_json);
  EXPECT_EQ(header.find_first_not_of(' ', expected_json.size()), std::string::npos) << "padding is spaces";
  ASSERT_EQ(bytes.size(), 8 + length + 20);
  float data[5];
  std::memcpy(data, bytes.data() + 8 + length, sizeof data);  // little-endian F32, a then b
  EXPECT_EQ(data[1], -2.0f);
  EXPECT_EQ(data[4], 4.0f);
  auto read = read_safetensors(path);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->tensors.at("b.weight").shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(read->metadata.at("format"), "pt");
  std::filesystem::remove(path);
}

// Disk full, as a file-size ulimit makes it: writes fail with EFBIG.
class DiskFullAfter {
 public:
  explicit DiskFullAfter(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~DiskFullAfter() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

TEST(Safetensors, AFailedWriteKeepsThePreviousFile) {
  const tessera::testing::ScratchDir scratch;
  const std::string& dir = scratch.path();
  std::vector<float> a(4096, 3.0f);
  ASSERT_TRUE(write_safetensors(dir + "/m.safetensors", {{"a", {1}, a.data()}}, {}).ok());
  const auto before = file_bytes(dir + "/m.safetensors");
  {
    const DiskFullAfter full(1024);
    EXPECT_FALSE(write_safetensors(dir + "/m.safetensors", {{"a", {4096}, a.data()}}, {{"x", "y"}}).ok());
  }
  EXPECT_EQ(file_bytes(dir + "/m.safetensors"), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "no temporary left behind";
}

TEST(Safetensors, CorruptFilesAreErrorsNotCrashes) {
  const tessera::testing::ScratchDir scratch;
  const std::string path = scratch.path("corrupt.safetensors");
  auto write_header = [&](const std::string& header, size_t data_bytes) {
    std::ofstream out(path, std::ios::binary);
    uint64_t length = header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
    out << header << std::string(data_bytes, '\0');
  };
  for (const std::string& header : {std::string(R"({"__metadata__":{"step":5}})"),
                                    std::string(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[8,4]}})"),
                                    std::string(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})"),
                                    std::string(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,"x"]}})"),
                                    std::string(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})"),
                                    std::string(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})"),  // 4 bytes no tensor holds
                                    std::string(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
                                    std::string(R"([1,2])")}) {
    write_header(header, 8);
    EXPECT_FALSE(read_safetensors(path).ok()) << header;
  }
  std::filesystem::remove(path);
}

TrainOptions tiny_run(int64_t steps, bool resume, planner::Precision precision = planner::Precision::fp32) {
  TrainOptions o;
  o.precision = precision;
  // fp16: overflows on the first steps (the test checks), so the scaler's state
  // and the optimizer's count of real updates must resume too.
  o.loss_scaler.initial_scale = 1 << 20;
  o.loss_scaler.growth_interval = 2;
  o.data_path = std::string(TESSERA_SOURCE_DIR) + "/data/text/kjv-genesis-exodus.txt";
  o.micro_batch_size = 2;
  o.seq_len = 16;
  o.num_micro_batches = 2;
  o.steps = steps;
  o.resume = resume;
  o.model_config_text = "{}";
  return o;
}

// Trains into DIR as `tessera train --out DIR` does: the directory opened (and
// locked) for the run, closed after it.
Result<TrainMetrics> train_in(const std::string& dir, TrainOptions o) {
  auto run_directory = RunDirectory::open(dir);
  if (!run_directory) return run_directory.error();
  o.run_directory = &run_directory.value();
  std::ostringstream log;
  static const planner::Model model = planner::load_model("tiny-gpt2").value();
  return train(model, o, log, false);
}

// A run directory that does not exist yet, inside this process's scratch directory.
std::string fresh_directory(const std::string& name) {
  static const tessera::testing::ScratchDir scratch;
  const std::string dir = scratch.path(name);
  std::filesystem::remove_all(dir);
  return dir;
}

// 6 steps straight, against 3 steps, save, and 3 more after --resume: the same bytes, in every precision.
TEST(Checkpoint, ResumeContinuesBitIdentically) {
  for (planner::Precision precision : {planner::Precision::fp32, planner::Precision::bf16, planner::Precision::fp16}) {
    const std::string straight = fresh_directory("tessera-straight"), split = fresh_directory("tessera-split");
    auto whole = train_in(straight, tiny_run(6, false, precision));
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    if (precision == planner::Precision::fp16) {
      ASSERT_FALSE(whole->skipped_steps.empty());
      EXPECT_LE(whole->skipped_steps.front(), 3) << "a step before the save is skipped";
      EXPECT_LT(whole->skipped_steps.back(), 6) << "the run updates after its skips";
    }
    ASSERT_TRUE(train_in(split, tiny_run(3, false, precision)).ok());
    auto resumed = train_in(split, tiny_run(6, true, precision));
    ASSERT_TRUE(resumed.ok()) << resumed.error().message;
    EXPECT_EQ(resumed->first_step, 4);
    EXPECT_EQ(resumed->checkpoint_step, 6);
    EXPECT_EQ(file_bytes(straight + "/model.safetensors"), file_bytes(split + "/model.safetensors")) << enum_name(precision);
    EXPECT_EQ(file_bytes(straight + "/optimizer.safetensors"), file_bytes(split + "/optimizer.safetensors")) << enum_name(precision);
    std::filesystem::remove_all(straight);
    std::filesystem::remove_all(split);
  }
}

// The GPU step's checkpoints (flat_checkpoint.h): a bf16 CPU run's
// checkpoint at step 2 loads into the host copy the GPU step keeps, which,
// written back as the GPU loop writes it, gives the same bytes as the CPU's
// own files; and a CPU run resumes it to step 4 with the bytes of 4 straight.
TEST(Checkpoint, TheGpuStepsFilesAreTheCpusBothWays) {
  const std::string straight = fresh_directory("tessera-flat-straight"), cpu = fresh_directory("tessera-flat-cpu"),
                    gpu = fresh_directory("tessera-flat-gpu");
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  ASSERT_TRUE(train_in(straight, tiny_run(4, false, planner::Precision::bf16)).ok());
  ASSERT_TRUE(train_in(cpu, tiny_run(2, false, planner::Precision::bf16)).ok());

  FlatAdamWState state(model);
  TrainingPosition position;
  std::string run_id;
  {
    auto directory = RunDirectory::open(cpu);
    ASSERT_TRUE(directory.ok());
    auto committed = directory->committed();
    ASSERT_TRUE(committed.ok() && committed->has_value());
    auto loaded = load_flat_checkpoint(committed->value(), model, state);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    position = loaded.value();
    run_id = committed->value().manifest.run_id;
  }
  EXPECT_EQ(position.step, 2);
  EXPECT_EQ(state.steps_taken(), 2);
  {
    const TrainOptions options = tiny_run(4, true, planner::Precision::bf16);
    auto data = load_training_data(options.data_path, model.config, options.micro_batch_size, options.seq_len);
    ASSERT_TRUE(data.ok());
    auto directory = RunDirectory::open(gpu);
    ASSERT_TRUE(directory.ok());
    auto staging = directory.value().stage(position.step);
    ASSERT_TRUE(staging.ok());
    auto files = write_flat_checkpoint_files(staging->directory, model, state, position);
    ASSERT_TRUE(files.ok()) << files.error().message;
    const CheckpointManifest manifest{position.step, run_id, std::move(files).value(), run_settings(model, options, data.value(), 1)};
    ASSERT_TRUE(commit_checkpoint_files(directory.value(), staging.value(), manifest, options.model_config_text, {kModelFileName, kOptimizerFileName}).ok());
  }
  EXPECT_EQ(file_bytes(cpu + "/model.safetensors"), file_bytes(gpu + "/model.safetensors"));
  EXPECT_EQ(file_bytes(cpu + "/optimizer.safetensors"), file_bytes(gpu + "/optimizer.safetensors"));
  auto resumed = train_in(gpu, tiny_run(4, true, planner::Precision::bf16));
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed->first_step, 3);
  EXPECT_EQ(file_bytes(straight + "/model.safetensors"), file_bytes(gpu + "/model.safetensors"));
  EXPECT_EQ(file_bytes(straight + "/optimizer.safetensors"), file_bytes(gpu + "/optimizer.safetensors"));
  for (const std::string& dir : {straight, cpu, gpu}) std::filesystem::remove_all(dir);
}

TEST(Checkpoint, OnlyTheCommittedCheckpointIsKept) {
  const std::string dir = fresh_directory("tessera-layout");
  TrainOptions o = tiny_run(4, false);
  o.save_every = 1;
  ASSERT_TRUE(train_in(dir, o).ok());
  EXPECT_EQ(std::filesystem::read_symlink(dir + "/checkpoint"), "checkpoints/step-00000004");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir + "/checkpoints"), {}), 1);
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json", "manifest.json"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/checkpoints/step-00000004/" + file)) << file;
  }
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), file_bytes(dir + "/checkpoints/step-00000004/model.safetensors"));
  std::filesystem::remove_all(dir);
}

// Disk full while saving: the committed checkpoint stays as it was and resumes
// to the same result as a run that never failed.
TEST(Checkpoint, AFailedSaveKeepsTheCommittedCheckpoint) {
  const std::string dir = fresh_directory("tessera-full"), straight = fresh_directory("tessera-full-straight");
  ASSERT_TRUE(train_in(dir, tiny_run(2, false)).ok());
  const auto model_before = file_bytes(dir + "/model.safetensors");
  {
    const DiskFullAfter full(100000);  // the optimizer file is larger
    auto failed = train_in(dir, tiny_run(4, true));
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.error().message.find("disk full"), std::string::npos) << failed.error().message;
  }
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), model_before);
  ASSERT_TRUE(train_in(dir, tiny_run(4, true)).ok());
  ASSERT_TRUE(train_in(straight, tiny_run(4, false)).ok());
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), file_bytes(straight + "/model.safetensors"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(straight);
}

TEST(Checkpoint, ResumeRefusesADamagedFileAndSaysWhich) {
  const std::string dir = fresh_directory("tessera-damaged");
  ASSERT_TRUE(train_in(dir, tiny_run(2, false)).ok());
  {
    std::fstream file(dir + "/checkpoints/step-00000002/optimizer.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(5000);
    file.put('\x7f');  // one flipped byte in the data
  }
  auto resumed = train_in(dir, tiny_run(4, true));
  ASSERT_FALSE(resumed.ok());
  EXPECT_NE(resumed.error().message.find("step-00000002/optimizer.safetensors is damaged"), std::string::npos) << resumed.error().message;
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, ResumeRefusesChangedSettingsUnlessAllowed) {
  const std::string dir = fresh_directory("tessera-changed");
  ASSERT_TRUE(train_in(dir, tiny_run(2, false)).ok());
  TrainOptions changed = tiny_run(3, true, planner::Precision::bf16);
  changed.micro_batch_size = 1;
  auto refused = train_in(dir, changed);
  ASSERT_FALSE(refused.ok());
  const std::string& message = refused.error().message;
  EXPECT_NE(message.find("--precision: fp32 in the checkpoint, bf16 now"), std::string::npos) << message;
  EXPECT_NE(message.find("--micro-batch: 2 in the checkpoint, 1 now"), std::string::npos) << message;
  EXPECT_NE(message.find("--allow-changes"), std::string::npos) << message;
  changed.allow_changes = true;
  auto allowed = train_in(dir, changed);
  ASSERT_TRUE(allowed.ok()) << allowed.error().message;
  EXPECT_EQ(allowed->checkpoint_step, 3);
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, AFreshRunDoesNotOverwriteACheckpoint) {
  const std::string dir = fresh_directory("tessera-fresh");
  ASSERT_TRUE(train_in(dir, tiny_run(2, false)).ok());
  auto again = train_in(dir, tiny_run(2, false));
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("holds a checkpoint already; add --resume"), std::string::npos) << again.error().message;
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, ResumeWithoutACheckpointStartsAtStepOne) {
  const std::string dir = fresh_directory("tessera-first"), straight = fresh_directory("tessera-first-straight");
  auto resumed = train_in(dir, tiny_run(2, true));
  ASSERT_TRUE(resumed.ok()) << resumed.error().message;
  EXPECT_EQ(resumed->first_step, 1);
  ASSERT_TRUE(train_in(straight, tiny_run(2, false)).ok());
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), file_bytes(straight + "/model.safetensors"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(straight);
}

// A stop request abandons the step in progress and commits the last complete
// one; resuming from it ends where an uninterrupted run ends.
TEST(Checkpoint, AStopCommitsTheLastCompleteStep) {
  const std::string dir = fresh_directory("tessera-stop"), straight = fresh_directory("tessera-stop-straight");
  TrainOptions o = tiny_run(5, false);
  int polls = 0;
  o.stop_requested = [&polls] { return ++polls > 6; };  // 2 micro-batches a step: stops at the start of step 4
  auto stopped = train_in(dir, o);
  ASSERT_TRUE(stopped.ok()) << stopped.error().message;
  EXPECT_TRUE(stopped->stopped);
  EXPECT_EQ(stopped->checkpoint_step, 3);
  ASSERT_TRUE(train_in(dir, tiny_run(5, true)).ok());
  ASSERT_TRUE(train_in(straight, tiny_run(5, false)).ok());
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), file_bytes(straight + "/model.safetensors"));
  EXPECT_EQ(file_bytes(dir + "/optimizer.safetensors"), file_bytes(straight + "/optimizer.safetensors"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(straight);
}

// A diverging run keeps a checkpoint whose weights are all finite.
TEST(Checkpoint, ADivergingRunKeepsTheLastFiniteCheckpoint) {
  const std::string dir = fresh_directory("tessera-nan");
  TrainOptions o = tiny_run(40, false);
  o.save_every = 1;
  o.optimizer.learning_rate = 1e30;
  o.optimizer.max_grad_norm = 0;
  auto diverged = train_in(dir, o);
  ASSERT_FALSE(diverged.ok());
  EXPECT_NE(diverged.error().message.find("lower --lr"), std::string::npos) << diverged.error().message;
  auto run_directory = RunDirectory::open(dir);
  ASSERT_TRUE(run_directory.ok());
  auto committed = run_directory->committed();
  ASSERT_TRUE(committed.ok() && committed->has_value()) << "a checkpoint is kept";
  auto weights = read_safetensors((*committed)->file("model.safetensors"));
  ASSERT_TRUE(weights.ok());
  for (const auto& [name, tensor] : weights->tensors) {
    for (float w : tensor.data) ASSERT_TRUE(std::isfinite(w)) << name;
  }
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, OneWriterAtATime) {
  const std::string dir = fresh_directory("tessera-lock");
  {
    auto first = RunDirectory::open(dir);
    ASSERT_TRUE(first.ok());
    auto second = RunDirectory::open(dir);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.error().message.find("in use by another tessera train (pid " + std::to_string(::getpid()) + ")"), std::string::npos)
        << second.error().message;
  }
  EXPECT_TRUE(RunDirectory::open(dir).ok()) << "closing the first released its lock";
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, OpeningRemovesWhatAnInterruptedSaveLeft) {
  const std::string dir = fresh_directory("tessera-leftovers");
  ASSERT_TRUE(train_in(dir, tiny_run(1, false)).ok());
  std::filesystem::create_directories(dir + "/checkpoints/.staging-step-00000002");
  std::filesystem::create_directories(dir + "/checkpoints/step-00000002");  // renamed, never committed
  auto reopened = RunDirectory::open(dir);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir + "/checkpoints"), {}), 1);
  auto committed = reopened->committed();
  ASSERT_TRUE(committed.ok() && committed->has_value());
  EXPECT_EQ((*committed)->manifest.step, 1);
  std::filesystem::remove_all(dir);
}

TEST(RunDirectory, RefusesAnEmptyPathAndAFile) {
  EXPECT_FALSE(RunDirectory::open("").ok());
  const tessera::testing::ScratchDir scratch;
  const std::string file = scratch.path("a-file");
  std::ofstream(file) << "x";
  auto opened = RunDirectory::open(file);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.error().message.find("is not a directory"), std::string::npos) << opened.error().message;
}

TEST(CheckpointManifest, RoundTripsAndRefusesDamage) {
  const CheckpointManifest manifest{12, std::string(32, 'a'), {{"model.safetensors", {100, "0123abcd"}}}, {{"precision", "--precision", "bf16"}}};
  auto parsed = parse_manifest(manifest_to_json(manifest), "m");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->step, 12);
  EXPECT_EQ(parsed->files[0].digest.crc32, "0123abcd");
  EXPECT_EQ(parsed->settings[0].value, "bf16");
  for (const char* bad : {"", "[]", R"({"schema":1,"kind":"checkpoint","step":-1})",
                          R"({"schema":1,"kind":"checkpoint","step":1,"run_id":"x","files":[],"settings":[]})",
                          R"({"schema":1,"kind":"checkpoint","step":1,"run_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","files":[{"name":"../x","bytes":1,"crc32":"00000000"}],"settings":[]})"}) {
    EXPECT_FALSE(parse_manifest(bad, "m").ok()) << bad;
  }
  EXPECT_EQ(changed_settings({{"precision", "--precision", "bf16"}}, {{"precision", "--precision", "fp32"}}),
            std::vector<std::string>{"--precision: bf16 in the checkpoint, fp32 now"});
  EXPECT_TRUE(changed_settings({{"seq_len", "--seq", "64"}}, {{"seq_len", "--seq", "64"}}).empty());
}

}  // namespace
}  // namespace tessera::engine
