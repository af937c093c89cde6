// SPDX-License-Identifier: Apache-2.0
// FileStore: a Store on a directory that every member can reach (a local or shared file system).
// Each key is one file whose name is the key with every character outside [A-Za-z0-9_-]
// percent-encoded. set() writes a temporary file and publishes it with link(2), which fails when
// the key exists (write-once) and is atomic, so a reader never sees a partial value; where the
// file system has no hard links, rename(2) after an existence check. get() polls every 5 ms.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "backends/store/store.h"
#include "core/base/expected.h"

namespace fsdp::store {

class FileStore final : public Store {
 public:
  // Creates `dir` (and its parents) when missing. Errors (kUnavailable): it cannot be created or
  // is not a directory.
  static Expected<std::unique_ptr<FileStore>> make(std::string dir);

  Status set(std::string_view key, std::string_view value) override;
  Expected<std::string> get(std::string_view key, std::chrono::milliseconds timeout) override;
  // Removes the key files (and stray temporary files) of this store; other files stay.
  Status clear() override;
  const std::string& name() const override { return name_; }

  // The file that holds `key` (tests).
  std::string path_of(std::string_view key) const;

 private:
  explicit FileStore(std::string dir);
  std::string dir_;
  std::string name_;
};

}  // namespace fsdp::store
