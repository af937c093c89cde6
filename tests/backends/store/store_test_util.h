// SPDX-License-Identifier: Apache-2.0
// A fresh directory per test for the store tests, removed at scope exit.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace fsdp::store::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = ::testing::TempDir() + "/fsdp_store_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter.fetch_add(1));
    std::filesystem::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace fsdp::store::testing
