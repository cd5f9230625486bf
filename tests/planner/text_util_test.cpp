// read_text_file: every input path bounded. Only regular files are read, and
// only up to the caller's limit, checked before reading.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/scratch_dir.h"
#include "tessera/planner/text_util.h"

namespace tessera::planner {
namespace {

class ReadTextFile : public ::testing::Test {
 protected:
  std::string path(const char* name) const { return scratch_.path(name); }
  const std::string& dir() const { return scratch_.path(); }

 private:
  tessera::testing::ScratchDir scratch_;
};

TEST_F(ReadTextFile, ReadsARegularFileUpToTheLimit) {
  std::ofstream(path("ten.json")) << "0123456789";
  auto text = read_text_file(path("ten.json"), "--model", 10);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(text.value(), "0123456789");
  auto over = read_text_file(path("ten.json"), "--model", 9);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message,
            "--model: '" + path("ten.json") + "' is 10 bytes, more than the 9 bytes this input may hold; give the path of a .json file");
}

// A sparse file of 16 MiB + 1 byte: refused by its size, not read into memory.
TEST_F(ReadTextFile, ALargerFileIsRefusedBeforeItIsRead) {
  std::ofstream(path("big.json")).close();
  std::filesystem::resize_file(path("big.json"), kMaxJsonFileBytes + 1);
  auto text = read_text_file(path("big.json"), "plan file", kMaxJsonFileBytes);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().message, "plan file: '" + path("big.json") +
                                      "' is 16777217 bytes, more than the 16 MiB this input may hold; give the path of a .json file");
}

// /dev/zero used to be read for about 2 GB before the size was checked, and a FIFO blocked for ever.
TEST_F(ReadTextFile, DevicesAndFifosAreRefusedWithoutReading) {
  ASSERT_EQ(::mkfifo(path("fifo.json").c_str(), 0600), 0);
  for (const auto& [file, kind] : {std::pair{std::string("/dev/zero"), "a character device"},
                                   std::pair{std::string("/dev/urandom"), "a character device"}, std::pair{path("fifo.json"), "a FIFO"}}) {
    auto text = read_text_file(file, "--model", kMaxJsonFileBytes);
    ASSERT_FALSE(text.ok()) << file;
    EXPECT_EQ(text.error().message, "--model: '" + file + "' is not a regular file (" + kind + "); give the path of a .json file");
  }
}

TEST_F(ReadTextFile, DirectoriesAndMissingFilesNameTheField) {
  auto directory = read_text_file(dir(), "metrics", kMaxJsonFileBytes);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().message, "metrics: '" + dir() + "' is a directory; give the path of a .json file");
  auto missing = read_text_file(path("missing.json"), "metrics", kMaxJsonFileBytes);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
  EXPECT_EQ(missing.error().message, "metrics: cannot open '" + path("missing.json") + "': No such file or directory");
}

}  // namespace
}  // namespace tessera::planner
