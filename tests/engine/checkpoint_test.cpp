#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

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
  const std::string path = ::testing::TempDir() + "tessera-header.safetensors";
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

TEST(Safetensors, AFailedWriteKeepsThePreviousFile) {
  const std::string dir = ::testing::TempDir() + "tessera-keep";
  std::filesystem::create_directories(dir);
  const float a[1] = {3.0f};
  ASSERT_TRUE(write_safetensors(dir + "/m.safetensors", {{"a", {1}, a}}, {}).ok());
  const auto before = file_bytes(dir + "/m.safetensors");
  std::filesystem::create_directories(dir + "/m.safetensors.tmp");  // the temporary cannot be created
  EXPECT_FALSE(write_safetensors(dir + "/m.safetensors", {{"a", {1}, a}}, {{"x", "y"}}).ok());
  EXPECT_EQ(file_bytes(dir + "/m.safetensors"), before);
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, CorruptFilesAreErrorsNotCrashes) {
  const std::string path = ::testing::TempDir() + "tessera-corrupt.safetensors";
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
                                    std::string(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})")}) {
    write_header(header, 8);
    EXPECT_FALSE(read_safetensors(path).ok()) << header;
  }
  std::filesystem::remove(path);
}

TrainOptions tiny_run(const std::string& dir, int64_t steps, bool resume, planner::Precision precision = planner::Precision::fp32) {
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
  o.checkpoint_dir = dir;
  o.resume = resume;
  return o;
}

// 6 steps straight, against 3 steps, save, and 3 more after --resume: the same bytes, in every precision.
TEST(Checkpoint, ResumeContinuesBitIdentically) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  for (planner::Precision precision : {planner::Precision::fp32, planner::Precision::bf16, planner::Precision::fp16}) {
    const std::string straight = ::testing::TempDir() + "tessera-straight", split = ::testing::TempDir() + "tessera-split";
    std::filesystem::create_directories(straight);
    std::filesystem::create_directories(split);
    std::ostringstream log;
    auto whole = train(model, tiny_run(straight, 6, false, precision), log, false);
    ASSERT_TRUE(whole.ok());
    if (precision == planner::Precision::fp16) {
      ASSERT_FALSE(whole->skipped_steps.empty());
      EXPECT_LE(whole->skipped_steps.front(), 3) << "a step before the save is skipped";
      EXPECT_LT(whole->skipped_steps.back(), 6) << "the run updates after its skips";
    }
    ASSERT_TRUE(train(model, tiny_run(split, 3, false, precision), log, false).ok());
    auto resumed = train(model, tiny_run(split, 6, true, precision), log, false);
    ASSERT_TRUE(resumed.ok()) << resumed.error().message;
    EXPECT_EQ(resumed->first_step, 4);
    EXPECT_EQ(file_bytes(straight + "/model.safetensors"), file_bytes(split + "/model.safetensors")) << enum_name(precision);
    EXPECT_EQ(file_bytes(straight + "/optimizer.safetensors"), file_bytes(split + "/optimizer.safetensors")) << enum_name(precision);
    std::filesystem::remove_all(straight);
    std::filesystem::remove_all(split);
  }
}

// Disk full while saving the optimizer file (here: its temporary cannot be
// created): the model file must not move ahead of it, so the previous pair
// still resumes; a pair mixed from two saves is refused.
TEST(Checkpoint, AFailedSaveKeepsThePreviousPair) {
  const planner::Model model = planner::load_model("tiny-gpt2").value();
  const std::string dir = ::testing::TempDir() + "tessera-pair";
  std::filesystem::remove_all(dir);
  std::ostringstream log;
  ASSERT_TRUE(train(model, tiny_run(dir, 2, false), log, false).ok());
  const auto model_before = file_bytes(dir + "/model.safetensors");
  const auto optimizer_before = file_bytes(dir + "/optimizer.safetensors");
  std::filesystem::create_directories(dir + "/optimizer.safetensors.tmp");
  auto failed = train(model, tiny_run(dir, 4, true), log, false);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(file_bytes(dir + "/model.safetensors"), model_before);
  EXPECT_EQ(file_bytes(dir + "/optimizer.safetensors"), optimizer_before);
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.safetensors.tmp"));
  std::filesystem::remove_all(dir + "/optimizer.safetensors.tmp");

  const std::string later = dir + "-later";
  ASSERT_TRUE(train(model, tiny_run(later, 4, false), log, false).ok());
  std::filesystem::copy_file(later + "/model.safetensors", dir + "/model.safetensors", std::filesystem::copy_options::overwrite_existing);
  auto mixed = train(model, tiny_run(dir, 6, true), log, false);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("model.safetensors is from step 4 but optimizer.safetensors from step 2"), std::string::npos)
      << mixed.error().message;
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(later);
}

}  // namespace
}  // namespace tessera::engine
