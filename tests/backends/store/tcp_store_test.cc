// SPDX-License-Identifier: Apache-2.0
// TcpStore on 127.0.0.1 with an ephemeral port: clients and the server see each other's keys,
// get waits for a later set, keys are write-once, timeouts and a missing server are one line, and
// a server that goes away ends a client's wait with an error instead of a hang.
#include "backends/store/tcp_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace fsdp::store {
namespace {

using namespace std::chrono_literals;

std::string binary_bytes(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += static_cast<char>((i * 53) & 0xff);
  }
  return s;
}

TEST(TcpStoreTest, ServerAndClientsShareKeys) {
  auto server = TcpStore::serve("127.0.0.1", 0);
  ASSERT_TRUE(server.has_value()) << server.error().message();
  const int port = (*server)->port();
  EXPECT_GT(port, 0);
  EXPECT_EQ((*server)->name(), "tcp:127.0.0.1:" + std::to_string(port));
  auto a = TcpStore::connect("127.0.0.1", port, 10s);
  auto b = TcpStore::connect("127.0.0.1", port, 10s);
  ASSERT_TRUE(a.has_value()) << a.error().message();
  ASSERT_TRUE(b.has_value()) << b.error().message();
  ASSERT_TRUE((*a)->set("from-a", binary_bytes(128)).ok());
  ASSERT_TRUE((*server)->set("from-server", "s").ok());
  EXPECT_EQ((*b)->get("from-a", 1s).value(), binary_bytes(128));
  EXPECT_EQ((*server)->get("from-a", 1s).value(), binary_bytes(128));
  EXPECT_EQ((*a)->get("from-server", 1s).value(), "s");
  const std::string big = binary_bytes(1 << 20);
  ASSERT_TRUE((*b)->set("big", big).ok());
  EXPECT_EQ((*a)->get("big", 1s).value(), big);
}

TEST(TcpStoreTest, GetWaitsForALaterSetFromAnotherThread) {
  auto server = TcpStore::serve("127.0.0.1", 0);
  ASSERT_TRUE(server.has_value()) << server.error().message();
  auto reader = TcpStore::connect("127.0.0.1", (*server)->port(), 10s);
  auto writer = TcpStore::connect("127.0.0.1", (*server)->port(), 10s);
  ASSERT_TRUE(reader.has_value() && writer.has_value());
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);  // several 50 ms polling slices
    EXPECT_TRUE((*writer)->set("late", "v").ok());
  });
  auto got = (*reader)->get("late", 30s);
  t.join();
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(*got, "v");
}

TEST(TcpStoreTest, KeysAreWriteOnceAndTimeoutsNameTheKey) {
  auto server = TcpStore::serve("127.0.0.1", 0);
  ASSERT_TRUE(server.has_value()) << server.error().message();
  auto client = TcpStore::connect("127.0.0.1", (*server)->port(), 10s);
  ASSERT_TRUE(client.has_value());
  ASSERT_TRUE((*client)->set("k", "1").ok());
  for (Store* s : {static_cast<Store*>(server->get()), static_cast<Store*>(client->get())}) {
    const Status again = s->set("k", "2");
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), ErrorCode::kFailedPrecondition);
    EXPECT_NE(again.error().message().find("key 'k' is already set"), std::string::npos);
    auto missing = s->get("nobody/sets/this", 120ms);
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.error().message(),
              "store " + (*server)->name() + ": key 'nobody/sets/this' not set within 0.12 s");
  }
  EXPECT_EQ((*client)->get("k", 1s).value(), "1");
}

TEST(TcpStoreTest, ConnectWithoutAServerTimesOut) {
  int port = 0;
  {
    auto probe = TcpStore::serve("127.0.0.1", 0);  // a port that was free a moment ago
    ASSERT_TRUE(probe.has_value());
    port = (*probe)->port();
  }
  auto client = TcpStore::connect("127.0.0.1", port, 100ms);
  ASSERT_FALSE(client.has_value());
  EXPECT_NE(client.error().message().find("store tcp:127.0.0.1:" + std::to_string(port) +
                                          ": cannot connect within 0.1 s"),
            std::string::npos)
      << client.error().message();
}

TEST(TcpStoreTest, AClientWaitingOnAVanishedServerGetsAnError) {
  auto server = TcpStore::serve("127.0.0.1", 0);
  ASSERT_TRUE(server.has_value());
  auto client = TcpStore::connect("127.0.0.1", (*server)->port(), 10s);
  ASSERT_TRUE(client.has_value());
  std::thread stop([&] {
    std::this_thread::sleep_for(100ms);
    server->reset();
  });
  auto got = (*client)->get("never", 600s);
  stop.join();
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message().find("lost the server"), std::string::npos)
      << got.error().message();
}

}  // namespace
}  // namespace fsdp::store
