// A directory of the running test's own, removed when the test ends.
//
// ctest runs each gtest case in a process of its own and, with -j2, two at a
// time: a directory named only after the suite is shared by tests running at
// once, and one test's clean-up deletes the other's files. The name here
// carries the suite, the test and the process id, so no two live tests share it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tessera::testing {

class ScratchDir {
 public:
  ScratchDir() : root_(unique_name()) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return root_; }
  std::string path(const std::string& name) const { return root_ + "/" + name; }

 private:
  static std::string unique_name() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string label = test ? std::string(test->test_suite_name()) + "." + test->name() : "no-test";
    std::string safe;
    for (char c : label) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '.') ? c : '_';
    return ::testing::TempDir() + "tessera-" + safe + "-" + std::to_string(::getpid());
  }

  std::string root_;
};

}  // namespace tessera::testing
