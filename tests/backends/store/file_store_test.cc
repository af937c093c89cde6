// SPDX-License-Identifier: Apache-2.0
// FileStore: bytes round-trip, a get waits for a set made by another store object (another thread,
// another process), write-once keys, the timeout message, clear() and odd keys.
#include "backends/store/file_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "tests/backends/store/store_test_util.h"

namespace fsdp::store {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

std::string binary_bytes(int n, int salt) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += static_cast<char>((i * 37 + salt) & 0xff);  // includes '\0' and high bytes
  }
  return s;
}

TEST(FileStoreTest, SetThenGetRoundTripsBinaryBytes) {
  TempDir dir;
  auto store = FileStore::make(dir.path() + "/nested/dir");
  ASSERT_TRUE(store.has_value()) << store.error().message();
  const std::string id = binary_bytes(128, 5);
  ASSERT_TRUE((*store)->set("dp/0/nccl-id", id).ok());
  auto got = (*store)->get("dp/0/nccl-id", 1s);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, id);
  ASSERT_TRUE((*store)->set("empty", "").ok());
  EXPECT_EQ((*store)->get("empty", 1s).value(), "");
  EXPECT_EQ((*store)->name(), "file:" + dir.path() + "/nested/dir");
}

TEST(FileStoreTest, GetWaitsForASetByAnotherStoreOnTheSameDirectory) {
  TempDir dir;
  auto reader = FileStore::make(dir.path());
  auto writer = FileStore::make(dir.path());
  ASSERT_TRUE(reader.has_value() && writer.has_value());
  const std::string value = binary_bytes(4096 + 17, 3);  // more than one read() chunk
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE((*writer)->set("late key", value).ok());
  });
  auto got = (*reader)->get("late key", 30s);
  t.join();
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, value);
}

TEST(FileStoreTest, ProcessesExchangeValuesThroughTheDirectory) {
  TempDir dir;
  std::filesystem::create_directories(dir.path());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: its own store object; exit status 0 only if it saw the parent's value.
    auto store = FileStore::make(dir.path());
    int code = 1;
    if (store.has_value() && (*store)->set("from-child", binary_bytes(128, 1)).ok()) {
      auto got = (*store)->get("from-parent", 30s);
      code = got.has_value() && *got == binary_bytes(128, 2) ? 0 : 2;
    }
    ::_exit(code);
  }
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->set("from-parent", binary_bytes(128, 2)).ok());
  auto got = (*store)->get("from-child", 30s);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, binary_bytes(128, 1));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(FileStoreTest, GetTimeoutNamesStoreKeyAndTimeout) {
  TempDir dir;
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  auto got = (*store)->get("dp/1/nccl-id", 50ms);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(got.error().message(),
            "store file:" + dir.path() + ": key 'dp/1/nccl-id' not set within 0.05 s");
}

TEST(FileStoreTest, KeysAreWriteOnce) {
  TempDir dir;
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->set("k", "first").ok());
  const Status again = (*store)->set("k", "second");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(again.error().message().find("key 'k' is already set"), std::string::npos)
      << again.error().message();
  EXPECT_EQ((*store)->get("k", 1s).value(), "first");
}

TEST(FileStoreTest, KeysWithSlashesAndDotsAreFlatFilesInTheDirectory) {
  TempDir dir;
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  for (const std::string key : {"a/b", "../escape", ".hidden", "a%2Fb"}) {
    const std::filesystem::path p = (*store)->path_of(key);
    EXPECT_EQ(p.parent_path(), std::filesystem::path(dir.path())) << key;
    ASSERT_TRUE((*store)->set(key, key).ok()) << key;
  }
  // "a/b" and "a%2Fb" are different keys even though one looks like the other's encoding.
  EXPECT_EQ((*store)->get("a/b", 1s).value(), "a/b");
  EXPECT_EQ((*store)->get("a%2Fb", 1s).value(), "a%2Fb");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/../escape"));
}

TEST(FileStoreTest, MalformedKeysAreErrors) {
  TempDir dir;
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ((*store)->set("", "x").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*store)->set(std::string(201, 'k'), "x").error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*store)->get("line\nbreak", 1ms).error().code(), ErrorCode::kInvalidArgument);
}

TEST(FileStoreTest, ClearRemovesKeysButNotOtherFiles) {
  TempDir dir;
  auto store = FileStore::make(dir.path());
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->set("a/0", "x").ok());
  std::ofstream(dir.path() + "/notes.txt") << "mine";
  ASSERT_TRUE((*store)->clear().ok());
  EXPECT_FALSE((*store)->get("a/0", 1ms).has_value());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/notes.txt"));
  EXPECT_TRUE((*store)->set("a/0", "y").ok());  // usable again
}

TEST(FileStoreTest, AFileInsteadOfADirectoryIsAnError) {
  TempDir dir;
  std::filesystem::create_directories(dir.path());
  std::ofstream(dir.path() + "/plain") << "x";
  auto store = FileStore::make(dir.path() + "/plain");
  ASSERT_FALSE(store.has_value());
  EXPECT_NE(store.error().message().find("store file:" + dir.path() + "/plain: cannot use"),
            std::string::npos)
      << store.error().message();
}

}  // namespace
}  // namespace fsdp::store
