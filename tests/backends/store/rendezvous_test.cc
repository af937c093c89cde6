// SPDX-License-Identifier: Apache-2.0
// Rendezvous over file and TCP stores with threads as members, each with its own store object:
// every member gets the first member's 128 bytes, the first member's error reaches the others,
// barriers name a missing rank, and the end-of-run handshake clears the store.
#include "backends/store/rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/store/file_store.h"
#include "backends/store/tcp_store.h"
#include "tests/backends/store/store_test_util.h"

namespace fsdp::store {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

// A fake 128-byte NCCL unique id, different per member, with zero and high bytes.
std::string fake_id(int member) {
  std::string s(128, '\0');
  for (int i = 0; i < 128; ++i) {
    s[static_cast<std::size_t>(i)] = static_cast<char>((i * 131 + member * 7) & 0xff);
  }
  s[5] = '\0';
  return s;
}

// `world` store objects of one kind: file stores on one directory, or a TCP server on member 0
// (127.0.0.1, ephemeral port) and clients.
std::vector<std::unique_ptr<Store>> make_members(bool tcp, int world, const std::string& dir) {
  std::vector<std::unique_ptr<Store>> stores;
  if (!tcp) {
    for (int r = 0; r < world; ++r) {
      auto s = FileStore::make(dir);
      EXPECT_TRUE(s.has_value());
      stores.push_back(std::move(*s));
    }
    return stores;
  }
  auto server = TcpStore::serve("127.0.0.1", 0);
  EXPECT_TRUE(server.has_value()) << server.error().message();
  const int port = (*server)->port();
  stores.push_back(std::move(*server));
  for (int r = 1; r < world; ++r) {
    auto c = TcpStore::connect("127.0.0.1", port, 10s);
    EXPECT_TRUE(c.has_value()) << c.error().message();
    stores.push_back(std::move(*c));
  }
  return stores;
}

class RendezvousTest : public ::testing::TestWithParam<bool> {};

TEST_P(RendezvousTest, EveryMemberGetsTheFirstMembersBytes) {
  TempDir dir;
  constexpr int kWorld = 4;
  auto stores = make_members(GetParam(), kWorld, dir.path());
  ASSERT_EQ(stores.size(), static_cast<std::size_t>(kWorld));
  std::vector<Expected<std::string>> got(kWorld, std::string());
  std::vector<std::thread> threads;
  for (int r = kWorld - 1; r >= 0; --r) {  // the first member starts last
    threads.emplace_back([&, r] {
      got[static_cast<std::size_t>(r)] = share_from_first(*stores[static_cast<std::size_t>(r)],
                                                          "dp/0/nccl-id", r == 0, fake_id(r), 30s);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(got[static_cast<std::size_t>(r)].has_value())
        << r << ": " << got[static_cast<std::size_t>(r)].error().message();
    EXPECT_EQ(*got[static_cast<std::size_t>(r)], fake_id(0)) << "member " << r;
  }
}

TEST_P(RendezvousTest, TheFirstMembersErrorReachesTheOthersAtOnce) {
  TempDir dir;
  auto stores = make_members(GetParam(), 2, dir.path());
  ASSERT_EQ(stores.size(), 2U);
  const Expected<std::string> failed = Error(ErrorCode::kUnavailable, "ncclGetUniqueId failed");
  auto first = share_from_first(*stores[0], "tp/3/nccl-id", true, failed, 30s);
  ASSERT_FALSE(first.has_value());
  EXPECT_EQ(first.error().message(), "ncclGetUniqueId failed");
  auto other = share_from_first(*stores[1], "tp/3/nccl-id", false, std::string(), 600s);
  ASSERT_FALSE(other.has_value());
  EXPECT_NE(other.error().message().find(
                "key 'tp/3/nccl-id': the first member failed: ncclGetUniqueId failed"),
            std::string::npos)
      << other.error().message();
}

TEST_P(RendezvousTest, BarrierReleasesEveryMemberAndNamesAMissingOne) {
  TempDir dir;
  constexpr int kWorld = 3;
  auto stores = make_members(GetParam(), kWorld, dir.path());
  ASSERT_EQ(stores.size(), static_cast<std::size_t>(kWorld));
  std::vector<Status> done(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      done[static_cast<std::size_t>(r)] =
          store_barrier(*stores[static_cast<std::size_t>(r)], "join", r, kWorld, 30s);
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (const Status& s : done) {
    EXPECT_TRUE(s.ok()) << s.error().message();
  }
  // Rank 2 never comes to the second barrier.
  const Status alone = store_barrier(*stores[1], "second", 1, kWorld, 100ms);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.error().message(), "rank 0 did not reach barrier 'second' within 0.1 s (store " +
                                         stores[1]->name() + ", key 'barrier/second/0')");
}

TEST_P(RendezvousTest, FinishWaitsForEveryMemberThenClears) {
  TempDir dir;
  constexpr int kWorld = 3;
  auto stores = make_members(GetParam(), kWorld, dir.path());
  ASSERT_EQ(stores.size(), static_cast<std::size_t>(kWorld));
  ASSERT_TRUE(stores[0]->set("dp/0/nccl-id", fake_id(0)).ok());
  // Without member 2, member 0 reports it.
  ASSERT_TRUE(finish_rendezvous(*stores[1], 1, kWorld, 30s).ok());
  const Status partial = finish_rendezvous(*stores[0], 0, kWorld, 100ms);
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.error().message(),
            "rank 2 did not finish within 0.1 s (store " + stores[0]->name() + ", key 'exit/2')");
  std::thread late([&] { EXPECT_TRUE(finish_rendezvous(*stores[2], 2, kWorld, 30s).ok()); });
  const Status all = finish_rendezvous(*stores[0], 0, kWorld, 30s);
  late.join();
  ASSERT_TRUE(all.ok()) << all.error().message();
  // Cleared: the old id is gone and the key can be set again by the next run.
  EXPECT_FALSE(stores[1]->get("dp/0/nccl-id", 1ms).has_value());
  EXPECT_TRUE(stores[1]->set("dp/0/nccl-id", fake_id(1)).ok());
}

INSTANTIATE_TEST_SUITE_P(FileAndTcp, RendezvousTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? "Tcp" : "File";
                         });

}  // namespace
}  // namespace fsdp::store
