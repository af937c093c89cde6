// SPDX-License-Identifier: Apache-2.0
// fresh_dir: an empty directory under the test temp dir, named after the test program's pid and
// removed when the test program ends (for tests that write checkpoints or other trees).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

namespace fsdp::testing {

// The directories fresh_dir made.
inline std::vector<std::string>& made_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

class RemoveMadeDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& dir : made_dirs()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
};
// One per test program (an inline variable is initialised once).
[[maybe_unused]] inline const ::testing::Environment* const kRemoveMadeDirs =
    ::testing::AddGlobalTestEnvironment(new RemoveMadeDirs);

// `<temp>/<prefix><name>_<pid>`, emptied now and removed at the end of the program.
inline std::string fresh_dir(const std::string& prefix, const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + prefix + name + "_" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  made_dirs().push_back(dir);
  return dir;
}

}  // namespace fsdp::testing
