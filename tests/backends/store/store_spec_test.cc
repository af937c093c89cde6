// SPDX-License-Identifier: Apache-2.0
// Store addresses: file:<dir> and tcp:<host>:<port> parse; anything else is one line naming the
// text and the expected forms. make_store checks the rank.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "backends/store/store.h"

namespace fsdp::store {
namespace {

TEST(StoreSpecTest, FileAndTcpAddressesParse) {
  auto file = parse_store_spec("file:/shared/run 1");
  ASSERT_TRUE(file.has_value()) << file.error().message();
  EXPECT_EQ(file->kind, StoreSpec::Kind::kFile);
  EXPECT_EQ(file->path, "/shared/run 1");
  auto tcp = parse_store_spec("tcp:node-0.cluster:29500");
  ASSERT_TRUE(tcp.has_value()) << tcp.error().message();
  EXPECT_EQ(tcp->kind, StoreSpec::Kind::kTcp);
  EXPECT_EQ(tcp->host, "node-0.cluster");
  EXPECT_EQ(tcp->port, 29500);
}

TEST(StoreSpecTest, MalformedAddressesAreOneLineErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "unknown kind"},
      {"/shared/dir", "unknown kind"},
      {"nfs:/x", "unknown kind"},
      {"file:", "empty directory"},
      {"tcp:host", "no port"},
      {"tcp::29500", "empty host"},
      {"tcp:host:", "port '' is not an integer in 1..65535"},
      {"tcp:host:0", "port '0' is not an integer in 1..65535"},
      {"tcp:host:65536", "port '65536' is not an integer in 1..65535"},
      {"tcp:host:29x", "port '29x' is not an integer in 1..65535"},
      {"tcp:host:-1", "port '-1' is not an integer in 1..65535"},
  };
  for (const auto& [text, why] : cases) {
    auto spec = parse_store_spec(text);
    ASSERT_FALSE(spec.has_value()) << text;
    EXPECT_EQ(spec.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(spec.error().message(), std::string("store '") + text + "': " + why +
                                          "; expected file:<directory> or tcp:<host>:<port>");
  }
}

TEST(StoreSpecTest, MakeStoreRejectsARankOutsideTheWorld) {
  auto spec = parse_store_spec("file:/tmp/unused");
  ASSERT_TRUE(spec.has_value());
  auto store = make_store(*spec, 2, 2, std::chrono::milliseconds(10));
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().message(), "store: rank 2 outside [0, 2)");
}

TEST(StoreSpecTest, SecondsInMessages) {
  EXPECT_EQ(format_seconds(std::chrono::milliseconds(60000)), "60");
  EXPECT_EQ(format_seconds(std::chrono::milliseconds(50)), "0.05");
  EXPECT_EQ(format_seconds(std::chrono::milliseconds(2500)), "2.5");
  EXPECT_EQ(format_seconds(std::chrono::milliseconds(1)), "0.001");
}

}  // namespace
}  // namespace fsdp::store
